"""No repeated n-grams in a draft (engines/repeats.py), on either side of the position filled."""

from __future__ import annotations

import numpy as np
import pytest
from scripted_backend import MASK, ScriptedBackend, one_hot_logits

from engines.ar_engine import Sampling
from engines.diffusion.sampler import DiffusionSampler
from engines.diffusion.settings import DiffusionSettings
from engines.errors import InvalidRequestError
from engines.events import Done, Token
from engines.llama_ar import LlamaAREngine
from engines.repeats import NoEndBefore, NoRepeatNgram, ban_repeats


def banned(tokens: list[int], position: int, n: int = 3) -> set[int]:
    canvas = np.array(tokens)
    rows = np.zeros((1, 10))
    ban_repeats(rows, canvas, canvas != MASK, np.array([position]), n)
    return set(np.flatnonzero(rows[0] == -np.inf).tolist())


@pytest.mark.parametrize(
    ("tokens", "position", "expected"),
    [
        ([1, 2, 3, 1, 2, MASK], 5, {3}),  # completes "1 2 3" from the left
        ([1, 2, 3, MASK, 2, 3], 3, {1}),  # from the right
        ([1, 2, 3, 1, MASK, 3], 4, {2}),  # around it
        ([1, 2, 3, 1, 5, MASK], 5, set()),  # "1 5 ?" repeats nothing
        ([1, 2, MASK, 1, 2, MASK], 2, set()),  # no settled run of three yet
        ([4, 2, 3, 1, 2, 3, 1, 2, MASK], 8, {3}),
    ],
)
def test_a_token_that_would_repeat_a_settled_run_is_banned(
    tokens: list[int], position: int, expected: set[int]
) -> None:
    assert banned(tokens, position) == expected


def test_two_sided_contexts_ban_each_completion_they_saw() -> None:
    # "7 ? 9" was completed by 8 and by 6: both are banned between a 7 and a 9.
    assert banned([7, 8, 9, 7, 6, 9, 7, MASK, 9], 7) == {6, 8}
    # Four at a time: "9 7 6 9" is settled, so 6 after "9 7" and before "9" is banned; 8 is not.
    assert banned([7, 8, 9, 7, 6, 9, 7, MASK, 9], 7, n=4) == {6}


def test_a_looping_model_writes_something_else_instead() -> None:
    """A model that wants "3 4" forever (its second choice is 5): with the rule, no run of three repeats."""
    pattern = [3, 4] * 8

    def script(sequence: np.ndarray, start: int, end: int) -> np.ndarray:
        logits = one_hot_logits(pattern[start - 1 : end - 1], [0.9] * (end - start))
        logits[:, 5] = np.log(0.05)  # the runner-up everywhere
        return logits

    def draft(settings: DiffusionSettings) -> list[int]:
        events = list(DiffusionSampler(ScriptedBackend(script)).generate([1], 16, settings))
        assert isinstance(events[-1], Done)
        return list(events[-2].canvas)  # type: ignore[union-attr]  # the last pass

    def repeated_runs(canvas: list[int]) -> int:
        runs = [tuple(canvas[i : i + 3]) for i in range(len(canvas) - 2)]
        return len(runs) - len(set(runs))

    looping = draft(DiffusionSettings.reference(steps=16, block_length=16, stop_at_eos=False))
    assert looping == pattern and repeated_runs(looping) == 12
    checked = draft(DiffusionSettings.reference(steps=16, block_length=16, stop_at_eos=False, no_repeat_ngram=3))
    assert repeated_runs(checked) == 0 and 5 in checked, checked
    # A whole block in one pass: the rule sees the tokens settling beside a position in the same pass.
    one_pass = draft(DiffusionSettings.reference(steps=2, block_length=8, stop_at_eos=False, no_repeat_ngram=3))
    assert repeated_runs(one_pass) == 0 and 5 in one_pass, one_pass


def test_it_is_off_in_the_reference_settings_and_checked() -> None:
    assert DiffusionSettings.reference().no_repeat_ngram == 0
    with pytest.raises(InvalidRequestError, match="no_repeat_ngram"):
        DiffusionSettings(no_repeat_ngram=1).checked(8)


def test_the_ar_rule_bans_the_token_that_would_repeat_the_run_ending_next() -> None:
    rule = NoRepeatNgram(3, prompt_length=2)
    prompt = [9, 9]
    scores = rule(np.array([*prompt, 1, 2, 3, 1, 2]), np.zeros(10, dtype=np.float32))
    assert set(np.flatnonzero(scores == -np.inf).tolist()) == {3}
    # The prompt is not counted: "9 9" then 9 may repeat what the prompt said.
    rule = NoRepeatNgram(3, prompt_length=2)
    assert not np.isinf(rule(np.array([*prompt, 9, 9]), np.zeros(10, dtype=np.float32))).any()


def test_a_local_ar_reply_never_repeats_a_run_of_three(ar_engine: LlamaAREngine) -> None:
    instruction = "Write a short paragraph about autumn in Kyoto."
    events = list(ar_engine.chat(instruction, max_tokens=96, sampling=Sampling(no_repeat_ngram=3)))
    ids = [e.token_id for e in events if isinstance(e, Token) and e.token_id >= 0]
    runs = [tuple(ids[i : i + 3]) for i in range(len(ids) - 2)]
    assert len(ids) > 20 and len(runs) == len(set(runs))


def test_no_end_of_text_before_the_least_length() -> None:
    rule = NoEndBefore([7, 8], prompt_length=2, min_tokens=3)
    early = rule(np.array([9, 9, 1, 2]), np.zeros(10, dtype=np.float32))
    assert set(np.flatnonzero(early == -np.inf).tolist()) == {7, 8}
    assert not np.isinf(rule(np.array([9, 9, 1, 2, 3]), np.zeros(10, dtype=np.float32))).any()


def test_a_local_ar_reply_runs_to_its_least_length(ar_engine: LlamaAREngine) -> None:
    instruction = "Say hi."
    short = list(ar_engine.chat(instruction, max_tokens=64))
    assert isinstance(short[-1], Done) and short[-1].stats.finish_reason == "eos"
    written = short[-1].stats.generated_tokens
    longer = list(ar_engine.chat(instruction, max_tokens=64, sampling=Sampling(min_tokens=written + 12)))
    assert isinstance(longer[-1], Done) and longer[-1].stats.generated_tokens >= written + 12
