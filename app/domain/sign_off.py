"""A draft's body and its sign-off ("Best regards,\\nAna"), so that a draft can be carried on from the end of
what it says rather than after its signature."""

from __future__ import annotations

import re

# A closing line: the words a letter ends with, then at most a comma or a full stop (a name may follow on it).
_CLOSING = re.compile(
    r"^(best|kind|warm|many|with)?\s*(regards|wishes|thanks|best|love)\b|^(thank you|thanks|cheers|sincerely|"
    r"yours|all the best|best wishes|take care|speak soon|see you)\b",
    re.IGNORECASE,
)
_LONGEST_SIGNATURE = 6  # words on a line after the closing one: a name, a role, a company


def split_sign_off(text: str) -> tuple[str, str]:
    """(body, sign_off): `text` cut before its last closing line where that line and the ones after it are short
    (a signature), else (`text` without its trailing white space, "")."""
    lines = text.rstrip().split("\n")
    for start in range(len(lines) - 1, max(-1, len(lines) - 5), -1):
        line = lines[start].strip()
        if not line:
            continue
        tail = [other.strip() for other in lines[start + 1 :] if other.strip()]
        if _is_closing(line) and all(len(other.split()) <= _LONGEST_SIGNATURE for other in tail):
            body = "\n".join(lines[:start]).rstrip()
            return body, text.rstrip()[len(body) :]
    return text.rstrip(), ""


def _is_closing(line: str) -> bool:
    words = line.split()
    return 0 < len(words) <= _LONGEST_SIGNATURE and bool(_CLOSING.match(line)) and not line.endswith("?")
