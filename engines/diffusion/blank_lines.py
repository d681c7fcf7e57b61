"""No runs of blank lines in a draft: a pass never settles a token that would make more than `limit` lines
in a row that are empty or hold one character (a lone "[" or "-").

Drafters that run out of text pad with newlines and brackets ("[\\n\\n[\\n\\n["); AR decoding, with its loop
control, does not. Diffusion fills positions in any order, so the run a token would join may lie on
either side of it: the rule reads the settled text around a masked position, each way up to a masked one
(a line cut off by a mask is taken as text, and one the canvas's start opens starts there; where the
draft ends, at end-of-text or at the canvas's end with nothing after it, its last line ends too, and
counts if it holds a visible character), and takes out of that position's proposals every token that would
make a run too long. Positions settled in the
same pass are guessed independently, so a pass's commits are placed again one by one, likeliest first,
each against the text with those before it in place; one that would make a run too long waits for the
next pass (never the first placed: its proposals were filtered against that very text).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# Tokens of settled text read on each side of a position: enough for a run of blank lines at any sane limit.
LOOKBACK = 48
# A line's visible characters are counted up to this: a line of two or more is text.
TEXT = 2


def _blank(chars: int) -> bool:
    return chars <= 1


def _visible(text: str) -> int:
    return min(TEXT, len(text.strip()))


@dataclass(frozen=True)
class Around:
    """The lines around a position, as far as the settled text tells."""

    run_before: int  # blank lines in a row just ended before the position's line
    open_before: int  # visible characters of the position's line before it (TEXT where cut by a mask)
    closed: bool  # whether the position's line ends (a settled newline after it)
    open_after: int  # visible characters of the position's line after it
    run_after: int  # blank lines in a row just after the position's line ends
    ends: bool = False  # whether the draft ends after the last line read (end-of-text, or the canvas's end)


class BlankLines:
    """The rule for one vocabulary: the tokens that can end or make a blank line, and what lines each holds."""

    def __init__(
        self, piece: Callable[[int], str], vocab_size: int, mask: int, limit: int, eos: frozenset[int] = frozenset()
    ) -> None:
        self.mask, self.limit, self.eos = mask, limit, eos
        # Whether the canvas's last position ends the draft; not where text after it follows (an infill's).
        self.canvas_ends_draft = True
        self.pieces = [piece(token) for token in range(vocab_size)]  # read once: every pass reads them
        rows: list[tuple[int, ...]] = []
        for token, text in enumerate(self.pieces):
            if token == mask or token in eos:  # end-of-text ends the draft: nothing after it is text
                continue
            lines = text.split("\n")
            if len(lines) == 1 and _visible(text) >= TEXT:
                continue  # text on one line: never a blank line by itself
            middle = [_blank(_visible(line)) for line in lines[1:-1]]
            run = inner = lead = trail = 0
            for blank in middle:
                run = run + 1 if blank else 0
                inner = max(inner, run)
            while lead < len(middle) and middle[lead]:
                lead += 1
            while trail < len(middle) and middle[-1 - trail]:
                trail += 1
            rows.append(
                (token, len(lines) - 1, _visible(lines[0]), _visible(lines[-1]), len(middle), lead, trail, inner)
            )
        # Per candidate: its id, newlines, visible characters before the first and after the last, the lines
        # between, and of those the blank ones from the start, from the end, and in the longest run.
        table = np.array(rows, dtype=np.int64).reshape(-1, 8)
        self.ids, self.newlines, self.first, self.last, self.middles, self.lead, self.trail, self.inner = table.T

    # ----- the text around a position ---------------------------------------------------------------

    def around(self, tokens: np.ndarray, position: int) -> Around:
        lo = position
        while lo > 0 and position - lo < LOOKBACK and int(tokens[lo - 1]) != self.mask:
            lo -= 1
        hi = position + 1
        while hi < len(tokens) and hi - position <= LOOKBACK and int(tokens[hi]) != self.mask:
            if int(tokens[hi]) in self.eos:  # the draft ends here: the line goes no further
                break
            hi += 1
        pieces = self.pieces
        before = "".join(pieces[t] for t in tokens[lo:position].tolist()).split("\n")
        after = "".join(pieces[t] for t in tokens[position + 1 : hi].tolist()).split("\n")
        cut_before = lo > 0  # the canvas's start opens a line; a mask or the lookback cuts one
        run_before = 0
        for index in range(len(before) - 2, -1, -1):
            if (index == 0 and cut_before) or not _blank(_visible(before[index])):
                break
            run_before += 1
        open_before = TEXT if len(before) == 1 and cut_before else _visible(before[-1])
        ends = int(tokens[hi]) in self.eos if hi < len(tokens) else self.canvas_ends_draft
        run_after = 0
        for index in range(1, len(after)):
            visible = _visible(after[index])
            # The last line read may go on, unless the draft ends there: then it is a line if it holds anything.
            last = index == len(after) - 1
            if not _blank(visible) or (last and not (ends and visible == 1)):
                break
            run_after += 1
        return Around(run_before, open_before, len(after) > 1, _visible(after[0]), run_after, ends)

    # ----- the rule --------------------------------------------------------------------------------

    def longest_runs(self, around: Around) -> np.ndarray:
        """For each candidate token, the longest run of blank lines through it were it placed here."""
        single = self.newlines == 0
        first_blank = around.open_before + self.first <= 1  # the first line the token ends (or its own)
        last_blank = self._blank_last_line(around, self.last + around.open_after)
        all_middle = self.lead == self.middles
        through_first = np.where(first_blank, around.run_before + 1 + self.lead, 0)
        through_last = np.where(last_blank, self.trail + 1 + around.run_after, 0)
        both = first_blank & last_blank & all_middle
        spanning = np.where(both, around.run_before + 2 + self.middles + around.run_after, 0)
        # A token without a newline is on one line: blank only if that line ends (settled text after it).
        own_line = np.where(
            self._blank_last_line(around, around.open_before + self.first + around.open_after),
            around.run_before + 1 + around.run_after,
            0,
        )
        return np.where(single, own_line, np.maximum.reduce([self.inner, through_first, through_last, spanning]))

    @staticmethod
    def _blank_last_line(around: Around, visible: np.ndarray) -> np.ndarray:
        """Whether the line a token's last piece is on, holding `visible` characters, is a blank line: where a
        settled newline ends it, if it holds at most one; where the draft ends with it, if it holds one."""
        if around.closed:
            return visible <= 1
        return np.asarray(around.ends) & (visible == 1)

    def banned(self, tokens: np.ndarray, position: int) -> np.ndarray:
        """The tokens that would make a run of blank lines too long at `position`."""
        return self.ids[self.longest_runs(self.around(tokens, position)) > self.limit]

    def ban(self, rows: np.ndarray, tokens: np.ndarray, positions: np.ndarray) -> None:
        """Set to minus infinity, in `rows` (one per canvas position in `positions`), every token that would
        make a run of blank lines too long there."""
        for row, position in enumerate(int(p) for p in positions):
            banned = self.banned(tokens, position)
            if len(banned):
                rows[row, banned] = -np.inf

    def kept(
        self, tokens: np.ndarray, positions: np.ndarray, committed: np.ndarray, priority: np.ndarray
    ) -> np.ndarray:
        """Of a pass's commits (`committed` at `positions`), which may settle: placed one by one, highest
        `priority` first, each against the canvas `tokens` with those placed before it."""
        canvas = tokens.copy()
        keep = np.ones(len(positions), dtype=bool)
        for index in np.argsort(-priority, kind="stable"):
            position, token = int(positions[index]), int(committed[index])
            if np.isin(token, self.banned(canvas, position)):
                keep[index] = False
            else:
                canvas[position] = token
        return keep
