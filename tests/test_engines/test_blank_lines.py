"""The blank-lines rule (engines/diffusion/blank_lines.py): no draft settles a run of more than
`blank_lines` lines that are empty or hold one character, whether its tokens settle pass by pass or
several in one pass."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scripted_backend import vocabulary_backend

from engines.diffusion.blank_lines import BlankLines
from engines.diffusion.sampler import DiffusionSampler
from engines.diffusion.settings import DiffusionSettings
from engines.events import Done

PIECES = ["a", "\n", "\n\n", "[", "word", " x\n", "\n\n\n\n", "<mask>", "<eos>", "b"]
MASK, EOS = 7, 8
A, NEWLINE, TWO_NEWLINES, BRACKET, WORD, X_LINE, FOUR_NEWLINES, B = 0, 1, 2, 3, 4, 5, 6, 9


def rule(limit: int = 2) -> BlankLines:
    return BlankLines(PIECES.__getitem__, len(PIECES), MASK, limit)


def banned_after(tokens: Sequence[int], limit: int = 2) -> set[int]:
    """What may not settle after `tokens`, with more of the draft still masked after it."""
    canvas = np.array([*tokens, MASK, MASK], dtype=np.int64)
    return set(rule(limit).banned(canvas, len(tokens)).tolist())


def test_a_newline_is_banned_only_where_it_would_make_the_run_too_long() -> None:
    # "word" then one empty line: a second is allowed, a third (two at once) is not.
    assert banned_after([WORD, TWO_NEWLINES]) == {TWO_NEWLINES, FOUR_NEWLINES}
    # Two empty lines already: any token that ends the open line blank is out, text and brackets are not.
    assert banned_after([WORD, TWO_NEWLINES, NEWLINE]) == {NEWLINE, TWO_NEWLINES, X_LINE, FOUR_NEWLINES}
    # A lone bracket on the open line still makes it a blank line when it ends.
    assert NEWLINE in banned_after([WORD, TWO_NEWLINES, NEWLINE, BRACKET])
    # After text on the open line, a newline ends a line of text.
    assert NEWLINE not in banned_after([WORD, TWO_NEWLINES, NEWLINE, WORD])
    # Three empty lines inside one token are too many anywhere; with a higher limit they are not.
    assert FOUR_NEWLINES in banned_after([WORD]) and not banned_after([WORD], limit=4)


def test_the_run_a_token_would_join_may_lie_after_it() -> None:
    # "word" | mask | "\n\n" "\n": a bracket or a newline there would close a third blank line.
    canvas = np.array([WORD, NEWLINE, MASK, TWO_NEWLINES, NEWLINE], dtype=np.int64)
    banned = set(rule().banned(canvas, 2).tolist())
    assert {BRACKET, NEWLINE, TWO_NEWLINES} <= banned and WORD not in banned
    # Before text, the same bracket only opens a line of text's neighbour: allowed.
    canvas = np.array([WORD, NEWLINE, MASK, WORD, NEWLINE], dtype=np.int64)
    assert BRACKET not in set(rule().banned(canvas, 2).tolist())


def test_a_line_cut_off_by_a_mask_is_taken_as_text() -> None:
    canvas = np.array([MASK, NEWLINE, NEWLINE, MASK], dtype=np.int64)
    # What precedes the first newline may be text: one blank line so far, so one more is allowed.
    assert NEWLINE not in set(rule().banned(canvas, 3).tolist())
    canvas = np.array([MASK, NEWLINE, NEWLINE, NEWLINE, MASK], dtype=np.int64)
    assert NEWLINE in set(rule().banned(canvas, 4).tolist())


def test_end_of_text_is_never_banned_and_ends_the_text_read_after_a_position() -> None:
    # llama.cpp renders end-of-text as nothing: as a piece it would "close" a blank line.
    pieces = [*PIECES[:EOS], "", *PIECES[EOS + 1 :]]
    with_eos = BlankLines(pieces.__getitem__, len(pieces), MASK, 2, frozenset({EOS}))
    canvas = np.array([WORD, TWO_NEWLINES, NEWLINE, MASK, NEWLINE], dtype=np.int64)
    assert EOS not in set(with_eos.banned(canvas, 3).tolist())
    # What follows end-of-text is not part of the draft: "word", "", "[" then the end is a run of two.
    canvas = np.array([WORD, TWO_NEWLINES, MASK, EOS, NEWLINE, NEWLINE], dtype=np.int64)
    assert BRACKET not in set(with_eos.banned(canvas, 2).tolist())
    # Read on, the newlines would make it "word", "", "[", "": three.
    assert BRACKET in set(with_eos.banned(np.delete(canvas, 3), 2).tolist())


def test_the_drafts_end_ends_its_last_line() -> None:
    # "word", "", "" and then a lone "[" or "a" as the draft's last line: a third blank line, at
    # end-of-text or at the canvas's end alike; a word there is text.
    pieces = [*PIECES[:EOS], "", *PIECES[EOS + 1 :]]
    with_eos = BlankLines(pieces.__getitem__, len(pieces), MASK, 2, frozenset({EOS}))
    for canvas in ([WORD, TWO_NEWLINES, NEWLINE, MASK, EOS, MASK], [WORD, TWO_NEWLINES, NEWLINE, MASK]):
        banned = set(with_eos.banned(np.array(canvas, dtype=np.int64), 3).tolist())
        assert {BRACKET, A, B} <= banned and WORD not in banned and EOS not in banned
    # Where text follows the canvas (an infill's), its last line may go on into that text.
    with_eos.canvas_ends_draft = False
    assert BRACKET not in set(with_eos.banned(np.array([WORD, TWO_NEWLINES, NEWLINE, MASK]), 3).tolist())
    # Nothing visible on the last line is no line: a newline at the end leaves the run at two.
    with_eos.canvas_ends_draft = True
    assert NEWLINE not in set(with_eos.banned(np.array([WORD, TWO_NEWLINES, MASK]), 2).tolist())


def test_commits_of_one_pass_are_checked_left_to_right() -> None:
    canvas = np.array([WORD, MASK, MASK, MASK, MASK], dtype=np.int64)
    positions = np.array([4, 1, 2, 3])
    # Placed likeliest first: "word", then a line end and two empty lines; the last would make a third.
    keep = rule().kept(canvas, positions, np.array([NEWLINE] * 4), np.array([0.1, 0.9, 0.8, 0.7]))
    assert keep.tolist() == [False, True, True, True]
    # Whichever comes first is placed: here the right-hand newlines go first, and the leftmost waits.
    keep = rule().kept(canvas, positions, np.array([NEWLINE] * 4), np.array([0.9, 0.1, 0.8, 0.7]))
    assert keep.tolist() == [True, False, True, True]


def newline_heavy(_sequence: np.ndarray, start: int, end: int) -> np.ndarray:
    """A drafter out of text: every position is surest of a newline, then of a bracket, then of "b"."""
    rows = np.full((end - start, len(PIECES)), -10.0)
    rows[:, NEWLINE], rows[:, BRACKET], rows[:, B] = 5.0, 3.0, 1.0
    return rows


def blank_run(text: str) -> int:
    """The longest run of lines that are empty or hold one character; the text's last line counts if it
    holds anything (bench/drafter_vs_ar.py counts the same way)."""
    longest = run = 0
    for line in text.splitlines():
        run = run + 1 if len(line.strip()) <= 1 else 0
        longest = max(longest, run)
    return longest


def draft(settings: DiffusionSettings, length: int = 24) -> str:
    backend = vocabulary_backend(newline_heavy, PIECES, MASK, EOS)
    events = list(DiffusionSampler(backend).generate([WORD], length, settings))
    done = events[-1]
    assert isinstance(done, Done)
    return done.text


def test_no_draft_holds_a_longer_run_whether_it_settles_one_token_a_pass_or_a_block() -> None:
    for length in (21, 22, 23, 24):  # drafts whose last line falls at each point of the pattern
        for steps in (length, 3):  # one token a pass, or a block of 8 a pass
            settings = DiffusionSettings(steps=steps, block_length=8, spacing=0, stop_at_eos=False)
            text = draft(settings, length)
            assert blank_run(text) == 2, (length, steps, text)
    # Off by name, as the reference runs have it: the drafter's newlines settle as they come.
    for steps in (24, 3):
        assert blank_run(draft(DiffusionSettings.reference(steps=steps, block_length=8))) > 2
