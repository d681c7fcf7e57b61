"""The document around the cursor, fitted to what a model can read: the text nearest the cursor first, cut at
paragraph boundaries, and a record of what was left out (shown to the user, never an error)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engines.ar_engine import AFTER_CURSOR_SHARE

Count = Callable[[str], int]
# A blank line (possibly with spaces) ends a paragraph.
_PARAGRAPH_END = re.compile(r"\n[ \t]*\n")
# Tokens kept free: text tokenized in pieces can count a few more tokens than the whole.
MARGIN_TOKENS = 8


@dataclass(frozen=True)
class ContextUse:
    """What the model is given of the document, and how many characters on each side it is not."""

    before: str
    after: str
    left_out_before: int = 0
    left_out_after: int = 0
    tokens: int = 0

    @property
    def complete(self) -> bool:
        return not self.left_out_before and not self.left_out_after

    def note(self) -> str:
        """One line for the status bar or the CLI ("" when the whole document fits)."""
        parts = []
        if self.left_out_before:
            parts.append(f"the first {self.left_out_before:,} characters before the cursor")
        if self.left_out_after:
            parts.append(f"the last {self.left_out_after:,} characters after it")
        if not parts:
            return ""
        return f"the model's context held {self.tokens:,} tokens of the document: {' and '.join(parts)} were left out"

    def as_json(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "before_chars": len(self.before),
            "after_chars": len(self.after),
            "left_out_before_chars": self.left_out_before,
            "left_out_after_chars": self.left_out_after,
        }


def _paragraphs(text: str) -> list[str]:
    """The text in paragraphs, each with the blank line that ends it: joined, they are the text again."""
    pieces, start = [], 0
    for match in _PARAGRAPH_END.finditer(text):
        pieces.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def _cut_to_fit(text: str, budget: int, count: Count, *, keep_end: bool) -> str:
    """The longest end (or start) of one paragraph that fits `budget` tokens, cut at a word boundary."""
    low, high = 0, len(text)  # characters kept: `low` fits, more than `high` does not
    while low < high:
        middle = (low + high + 1) // 2
        piece = text[len(text) - middle :] if keep_end else text[:middle]
        if count(piece) <= budget:
            low = middle
        else:
            high = middle - 1
    kept = text[len(text) - low :] if keep_end else text[:low]
    if low < len(text):  # cut inside: back to the nearest whole word
        space = kept.find(" ") if keep_end else kept.rfind(" ")
        if space >= 0:
            kept = kept[space + 1 :] if keep_end else kept[:space]
    return kept


def _keep(text: str, budget: int, count: Count, *, keep_end: bool) -> tuple[str, int]:
    """Whole paragraphs, nearest the cursor first, while they fit (the one at the cursor cut to fit when it is
    too long by itself)."""
    whole = count(text)
    if whole <= budget:
        return text, whole
    paragraphs = _paragraphs(text)
    if keep_end:
        paragraphs.reverse()
    # Nearest the cursor first.
    kept: list[str] = []
    used = 0
    for paragraph in paragraphs:
        cost = count(paragraph) + (1 if kept else 0)  # a token that may span the boundary with the one before
        if used + cost <= budget:
            kept.append(paragraph)
            used += cost
            continue
        if not kept:  # the paragraph at the cursor is too long by itself: as much of it as fits
            kept.append(_cut_to_fit(paragraph, budget - used, count, keep_end=keep_end))
            used += count(kept[-1])
        break
    # Pieces tokenized apart can count fewer tokens than joined (a token across the boundary): measure the
    # whole, and drop the farthest paragraph until it fits.
    text_kept = "".join(reversed(kept) if keep_end else kept)
    used = count(text_kept)
    while used > budget and len(kept) > 1:
        kept.pop()
        text_kept = "".join(reversed(kept) if keep_end else kept)
        used = count(text_kept)
    if used > budget:
        text_kept = _cut_to_fit(text_kept, budget, count, keep_end=keep_end)
        used = count(text_kept)
    return text_kept, used


def fit_context(before: str, after: str, budget: int, count: Count, *, after_at_most: int | None = None) -> ContextUse:
    """The document around the cursor within `budget` tokens: all of it when it fits; otherwise the text after
    the cursor keeps at least a quarter of the budget (its start; never more than `after_at_most`, where the
    engine cuts it there itself), and the text before it the rest (its end)."""
    budget = max(0, budget - MARGIN_TOKENS)
    need_before, need_after = count(before), count(after)
    if need_before + need_after <= budget and (after_at_most is None or need_after <= after_at_most):
        return ContextUse(before, after, tokens=need_before + need_after)
    after_budget = min(need_after, max(budget // AFTER_CURSOR_SHARE, budget - need_before))
    if after_at_most is not None:
        after_budget = min(after_budget, after_at_most)
    kept_after, used_after = _keep(after, after_budget, count, keep_end=False) if after else ("", 0)
    kept_before, used_before = _keep(before, budget - used_after, count, keep_end=True) if before else ("", 0)
    return ContextUse(
        kept_before,
        kept_after,
        left_out_before=len(before) - len(kept_before),
        left_out_after=len(after) - len(kept_after),
        tokens=used_before + used_after,
    )


# How a continued reply's request gives the text after the cursor: a sentence of the request, not a heading
# over the document, so that a model has nothing to copy back as if it were the answer.
AFTER_THE_CURSOR = "My text goes on after yours with:"


@dataclass(frozen=True)
class ContinuedReply:
    """A draft into a document laid out for a model that goes on from the start of its own reply: the request
    (with the text after the cursor, where there is some) is the user's turn and the document up to the cursor
    is the start of the reply. The white space the document ends with is left for the model to write (a BPE
    model writes a word with its space); `held_back` is that white space, which the draft then starts with
    and which the document already has."""

    request: str
    reply_start: str
    held_back: str


def continued_reply(instruction: str, before: str, after: str) -> ContinuedReply:
    start = before.rstrip()
    request = f"{instruction}\n\n({AFTER_THE_CURSOR} {after.strip()})" if after.strip() else instruction
    return ContinuedReply(request, start, before[len(start) :])


def document_instruction(instruction: str, before: str, after: str) -> str:
    """An instruction with the document it is to be written into under headings (for a model that reads it
    in the request: the block-causal drafter, trained on this layout, and an AR model that cannot be given
    the start of its reply)."""
    parts = [instruction]
    if before:
        parts.append(f"The document, up to where your text goes:\n\n{before}")
    if after:
        parts.append(f"The document after your text:\n\n{after}")
    return "\n\n".join(parts)


def rewrite_instruction(instruction: str, selection: str) -> str:
    """What a model is asked when the user rewrites a selection with an instruction."""
    return f"Rewrite this passage ({instruction.strip()}). Reply with the new passage only.\n\n{selection}"


# Words in a rewrite's instruction that change how long the new text should be, and by how much.
_LENGTH_WORDS: tuple[tuple[tuple[str, ...], float], ...] = (
    (("shorter", "short", "concise", "brief", "summar", "condense", "tighten", "trim"), 0.6),
    (("longer", "expand", "elaborate", "detail", "more about", "flesh out"), 1.6),
    (("list", "bullet", "points"), 1.3),
)


def suggested_rewrite_tokens(instruction: str, selection_tokens: int) -> int:
    """The canvas a rewrite starts with: the selection's length, scaled where the instruction asks for
    shorter or longer text (the user can change it in the dialog)."""
    lowered = instruction.lower()
    scale = next((factor for words, factor in _LENGTH_WORDS if any(word in lowered for word in words)), 1.25)
    return max(8, round(selection_tokens * scale))
