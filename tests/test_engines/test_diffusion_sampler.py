"""The refinement sampler over a scripted backend: schedules, remasking rules, thresholds, EOS, infill."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted_backend import EOS, MASK, VOCAB, ScriptedBackend, fixed_script, one_hot_logits

from engines.cancel import CancelToken
from engines.diffusion.sampler import DiffusionSampler, spaced
from engines.diffusion.schedule import even_split, timestep_commits
from engines.diffusion.scoring import propose
from engines.diffusion.settings import DiffusionSettings, EosRule
from engines.errors import InvalidRequestError
from engines.events import DiffusionStats, Done, Pass

PROMPT = [0, 1, 2]


def run(
    backend: ScriptedBackend,
    length: int,
    settings: DiffusionSettings,
    *,
    suffix: Sequence[int] = (),
    cancel: CancelToken | None = None,
) -> tuple[list[Pass], Done]:
    events = list(DiffusionSampler(backend).generate(PROMPT, length, settings, suffix=suffix, cancel=cancel))
    done = events[-1]
    assert isinstance(done, Done) and isinstance(done.stats, DiffusionStats)
    passes = [e for e in events[:-1] if isinstance(e, Pass)]
    assert len(passes) == len(events) - 1 == done.stats.passes
    return passes, done


def confidences(length: int, seed: int = 0) -> list[float]:
    return list(np.random.default_rng(seed).uniform(0.2, 0.95, length))


def test_fixed_steps_commit_evenly_and_fill_the_canvas() -> None:
    targets = [t % 10 for t in range(32)]
    backend = ScriptedBackend(fixed_script(targets, confidences(32), len(PROMPT)))
    passes, done = run(backend, 32, DiffusionSettings.reference(steps=8, block_length=32))
    assert [len(p.committed) for p in passes] == [4] * 8
    assert passes[-1].canvas == tuple(targets)
    assert done.text == "".join(chr(ord("a") + t) for t in targets)
    assert done.stats.finish_reason == "length" and done.stats.generated_tokens == 32


def test_confidence_rule_commits_the_most_confident_first() -> None:
    conf = confidences(16, seed=3)
    backend = ScriptedBackend(fixed_script([1] * 16, conf, len(PROMPT)))
    passes, _ = run(backend, 16, DiffusionSettings.reference(steps=16, block_length=16))
    order = [p.committed[0] for p in passes]
    assert order == sorted(range(16), key=lambda i: -conf[i])
    assert [p.confidences[0] for p in passes] == pytest.approx(sorted(conf, reverse=True), rel=1e-4)


def test_margin_and_entropy_rules_prefer_peaked_positions() -> None:
    # Position 0 is peaked, position 1 split between two tokens with the same top probability.
    table = np.full((2, VOCAB), np.log(0.01))
    table[0, 3], table[0, 4] = np.log(0.5), np.log(0.01)
    table[1, 3], table[1, 4] = np.log(0.5), np.log(0.45)
    for algorithm in ("margin", "entropy"):
        backend = ScriptedBackend(lambda _s, start, end: table[start - 3 : end - 3])
        passes, _ = run(backend, 2, DiffusionSettings.reference(steps=2, block_length=2, algorithm=algorithm))
        assert passes[0].committed == (0,), algorithm


def test_blocks_commit_left_to_right() -> None:
    backend = ScriptedBackend(fixed_script([2] * 32, confidences(32, seed=1), len(PROMPT)))
    passes, _ = run(backend, 32, DiffusionSettings.reference(steps=16, block_length=8))
    for p in passes:
        lo, hi = p.window
        assert all(lo <= c < hi for c in p.committed)
        assert not any(p.masked[:lo]), "earlier blocks are finished before a later block starts"
        assert all(p.masked[hi:]), "later blocks stay masked"
    assert [p.window for p in passes[::4]] == [(0, 8), (8, 16), (16, 24), (24, 32)]
    # The backend is told that everything before the current block is final (the cacheable part).
    assert [c.stable for c in backend.calls[::4]] == [3, 11, 19, 27]


def test_threshold_commits_everything_confident_and_at_least_one() -> None:
    conf = [0.95, 0.2, 0.92, 0.3, 0.99, 0.1, 0.5, 0.97]
    backend = ScriptedBackend(fixed_script([5] * 8, conf, len(PROMPT)))
    passes, _ = run(backend, 8, DiffusionSettings.reference(threshold=0.9, block_length=8))
    assert set(passes[0].committed) == {0, 2, 4, 7}
    assert [len(p.committed) for p in passes[1:]] == [1, 1, 1, 1]
    assert len(passes) == 5 < 8


def test_stable_prefix_only_grows_and_matches_the_canvas() -> None:
    backend = ScriptedBackend(fixed_script([t % 10 for t in range(24)], confidences(24, seed=5), len(PROMPT)))
    passes, done = run(backend, 24, DiffusionSettings.reference(steps=24, schedule="timestep", block_length=24))
    stables = [p.stable_prefix for p in passes]
    assert stables == sorted(stables) and stables[-1] == 24
    for p in passes:
        assert not any(p.masked[: p.stable_prefix])
        assert p.stable_prefix == len(p.masked) or p.masked[p.stable_prefix]
        assert done.text.startswith(p.stable_text)


def test_timestep_schedule_follows_dream() -> None:
    backend = ScriptedBackend(fixed_script([1] * 64, confidences(64), len(PROMPT)))
    passes, _ = run(backend, 64, DiffusionSettings.reference(steps=8, schedule="timestep"))
    assert len(passes) == 8
    assert all(p.window == (0, 64) for p in passes)
    masked = 64
    for step, p in enumerate(passes):
        assert len(p.committed) == timestep_commits(masked, step, 8, 1e-3)
        masked -= len(p.committed)
    assert masked == 0


def test_origin_unmasks_at_random_and_finishes() -> None:
    backend = ScriptedBackend(fixed_script([1] * 40, [0.5] * 40, len(PROMPT)))
    passes, done = run(
        backend, 40, DiffusionSettings.reference(steps=6, schedule="timestep", algorithm="origin", seed=7)
    )
    assert len(passes) == 6 and not any(passes[-1].masked)
    assert done.stats.generated_tokens == 40


def test_eos_stops_early_and_is_trimmed() -> None:
    # Position 4 predicts EOS; everything is confident, so the prefix fills before the tail.
    targets = [1, 2, 3, 4, EOS, 5, 6, 7, 8, 9, 1, 2]
    conf = [0.9, 0.8, 0.85, 0.7, 0.99, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3]
    backend = ScriptedBackend(fixed_script(targets, conf, len(PROMPT)))
    passes, done = run(backend, 12, DiffusionSettings.reference(steps=12, block_length=12))
    assert done.stats.finish_reason == "eos"
    assert done.text == "bcde"
    assert len(passes) == 5 < 12
    assert passes[-1].stable_prefix == 4


def test_suppressed_eos_is_committed_last() -> None:
    targets = [1, EOS, 2, 3]
    conf = [0.5, 0.99, 0.6, 0.7]
    backend = ScriptedBackend(fixed_script(targets, conf, len(PROMPT)))
    passes, done = run(backend, 4, DiffusionSettings.reference(steps=4, block_length=4, eos="last"))
    assert [p.committed[0] for p in passes] == [3, 2, 0, 1]
    assert done.text == "b" and done.stats.finish_reason == "eos"


def test_in_order_eos_is_committed_only_where_the_text_has_reached() -> None:
    # The model is surest of end-of-text at the canvas's end; committed there first, it would spread.
    targets = [1, 2, EOS, EOS, EOS, EOS]
    conf = [0.5, 0.6, 0.7, 0.95, 0.97, 0.99]
    free_passes, _ = run(
        ScriptedBackend(fixed_script(targets, conf, len(PROMPT))),
        6,
        DiffusionSettings.reference(steps=6, block_length=6),
    )
    assert free_passes[0].committed[0] == 5  # free: the canvas's last position first
    passes, done = run(
        ScriptedBackend(fixed_script(targets, conf, len(PROMPT))),
        6,
        DiffusionSettings.reference(steps=6, block_length=6, eos="in_order"),
    )
    assert [p.committed[0] for p in passes] == [1, 0, 2]  # text first, then the end where the text reached
    assert isinstance(done.stats, DiffusionStats)
    assert done.text == "bc" and done.stats.finish_reason == "eos" and done.stats.passes == 3
    # Under a threshold, confident end-of-text beyond the first mask waits too.
    passes, done = run(
        ScriptedBackend(fixed_script(targets, conf, len(PROMPT))),
        6,
        DiffusionSettings.reference(threshold=0.9, block_length=6, eos="in_order"),
    )
    assert [list(p.committed) for p in passes] == [[1], [0], [2]]
    assert done.text == "bc"


def test_infill_keeps_prefix_and_suffix_and_sees_both() -> None:
    suffix = [7, 8, 9]
    seen_suffixes: list[list[int]] = []

    def script(sequence: np.ndarray, start: int, end: int) -> np.ndarray:
        seen_suffixes.append([int(t) for t in sequence[-3:]])
        assert [int(t) for t in sequence[:3]] == PROMPT
        return one_hot_logits([4] * (end - start), [0.6] * (end - start))

    backend = ScriptedBackend(script)
    _passes, done = run(backend, 6, DiffusionSettings.reference(steps=3, block_length=6), suffix=suffix)
    assert all(s == suffix for s in seen_suffixes) and len(seen_suffixes) == 3
    assert len(backend.calls[0].sequence) == len(PROMPT) + 6 + len(suffix)
    assert done.text == "eeeeee"


def test_cancel_stops_within_one_pass() -> None:
    backend = ScriptedBackend(fixed_script([1] * 32, confidences(32), len(PROMPT)))
    cancel = CancelToken()
    events = []
    for event in DiffusionSampler(backend).generate(PROMPT, 32, DiffusionSettings.reference(steps=32), cancel=cancel):
        events.append(event)
        if isinstance(event, Pass) and event.index == 1:
            cancel.cancel()
    done = events[-1]
    assert isinstance(done, Done) and done.stats.finish_reason == "cancelled"
    assert len(events) == 3 and len(backend.calls) == 2


def test_seeded_sampling_repeats_exactly_and_seeds_differ() -> None:
    table = np.log(np.full((16, VOCAB), 1 / VOCAB))

    def sample(seed: int) -> str:
        backend = ScriptedBackend(lambda _s, start, end: table[: end - start])
        return run(backend, 16, DiffusionSettings.reference(steps=16, block_length=16, temperature=1.0, seed=seed))[
            1
        ].text

    assert sample(11) == sample(11)
    assert sample(11) != sample(12)


def test_gumbel_sampling_follows_the_softmax() -> None:
    probs = np.array([0.6, 0.25, 0.1, 0.05])
    logits = np.log(np.tile(probs, (4000, 1)))
    drawn = propose(logits, algorithm="confidence", temperature=1.0, top_k=0, top_p=1.0, rng=np.random.default_rng(0))
    freq = np.bincount(drawn.tokens, minlength=4) / 4000
    assert freq == pytest.approx(probs, abs=0.03)


def test_top_k_and_top_p_cut_the_tail() -> None:
    probs = np.array([0.5, 0.3, 0.15, 0.05])
    logits = np.log(np.tile(probs, (2000, 1)))
    rng = np.random.default_rng(1)
    top1 = propose(logits, algorithm="confidence", temperature=1.0, top_k=1, top_p=1.0, rng=rng)
    assert set(top1.tokens) == {0} and top1.probabilities == pytest.approx(1.0)
    nucleus = propose(logits, algorithm="confidence", temperature=1.0, top_k=0, top_p=0.7, rng=rng)
    assert set(nucleus.tokens) == {0, 1}
    assert nucleus.probabilities[nucleus.tokens == 0] == pytest.approx(0.5 / 0.8)


def test_bad_settings_are_refused_clearly() -> None:
    backend = ScriptedBackend(fixed_script([1] * 64, [0.5] * 64, len(PROMPT)))
    sampler = DiffusionSampler(backend)
    with pytest.raises(InvalidRequestError, match=r"steps \(1\) must be at least the number of blocks \(2"):
        list(sampler.generate(PROMPT, 64, DiffusionSettings.reference(steps=1, block_length=32)))
    with pytest.raises(InvalidRequestError, match="threshold must be in"):
        list(sampler.generate(PROMPT, 8, DiffusionSettings.reference(threshold=1.5)))
    with pytest.raises(InvalidRequestError, match="algorithm must be one of"):
        unknown = DiffusionSettings(algorithm="best")  # type: ignore[arg-type]  # not an Algorithm, on purpose
        list(sampler.generate(PROMPT, 8, unknown))


@settings(max_examples=60, deadline=None)
@given(masked=st.integers(0, 300), steps=st.integers(1, 64))
def test_even_split_adds_up(masked: int, steps: int) -> None:
    split = even_split(masked, steps)
    assert sum(split) == masked and max(split) - min(split) <= 1 and split == sorted(split, reverse=True)


@settings(max_examples=40, deadline=None)
@given(length=st.integers(1, 40), block=st.integers(1, 16), extra=st.integers(0, 20))
def test_every_fixed_step_draft_fills_its_canvas(length: int, block: int, extra: int) -> None:
    settings_ = DiffusionSettings.reference(block_length=block, steps=-(-length // block) + extra)
    backend = ScriptedBackend(fixed_script([3] * length, confidences(length), len(PROMPT)))
    passes, done = run(backend, length, settings_)
    assert not any(passes[-1].masked) and MASK not in passes[-1].canvas
    assert done.stats.generated_tokens == length
    assert len(passes) <= settings_.steps


def test_without_early_stop_every_pass_runs_and_the_text_is_still_trimmed() -> None:
    targets = [1, 2, 3, 4, EOS, 5, 6, 7, 8, 9, 1, 2]
    conf = [0.9, 0.8, 0.85, 0.7, 0.99, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3]
    backend = ScriptedBackend(fixed_script(targets, conf, len(PROMPT)))
    passes, done = run(backend, 12, DiffusionSettings.reference(steps=12, block_length=12, stop_at_eos=False))
    assert len(passes) == 12 and done.text == "bcde" and done.stats.finish_reason == "eos"


def test_the_mask_token_is_never_committed() -> None:
    # A model (an untrained one, say) that prefers the mask token itself everywhere.
    table = one_hot_logits([MASK] * 8, [0.9] * 8)
    table[:, 4] = np.log(0.05)
    backend = ScriptedBackend(lambda _s, start, end: table[start - 3 : end - 3].copy())
    passes, done = run(backend, 8, DiffusionSettings.reference(steps=8, block_length=8))
    assert len(passes) == 8 and MASK not in passes[-1].canvas and done.text == "e" * 8


def test_spaced_passes_over_neighbours_of_what_it_took() -> None:
    positions = np.array([0, 1, 2, 3, 4, 5, 6, 7])
    ranked = np.array([3, 4, 2, 7, 0, 5, 1, 6])  # best first
    assert list(spaced(ranked, positions, 3, 0)) == [3, 4, 2]
    assert list(spaced(ranked, positions, 3, 1)) == [3, 7, 0]  # 4 and 2 touch 3
    assert list(spaced(ranked, positions, 2, 3)) == [3, 7]
    # Not enough room: the nearest are taken, best first, after every spaced one.
    assert list(spaced(ranked, positions, 4, 3)) == [3, 7, 4, 2]
    # The gaps are between canvas positions, not between indices into the masked list.
    assert list(spaced(np.array([0, 1]), np.array([2, 9]), 2, 3)) == [0, 1]


def test_spacing_keeps_neighbours_out_of_the_same_pass() -> None:
    # The model is surest of a run of neighbours: reference decoding fills them together.
    conf = [0.3, 0.4, 0.9, 0.91, 0.92, 0.93, 0.5, 0.6]
    targets = [1] * 8
    plain, _ = run(ScriptedBackend(fixed_script(targets, conf, len(PROMPT))), 8, DiffusionSettings.reference(steps=4))
    assert sorted(plain[0].committed) == [4, 5]
    passes, done = run(
        ScriptedBackend(fixed_script(targets, conf, len(PROMPT))), 8, DiffusionSettings.reference(steps=4, spacing=1)
    )
    assert sorted(passes[0].committed) == [3, 5]
    for p in passes:
        assert all(abs(a - b) > 1 for a in p.committed for b in p.committed if a != b)
    assert [len(p.committed) for p in passes] == [2] * 4 and done.stats.generated_tokens == 8
    # The Dream schedule spaces its commits too (its last pass takes whatever is left); a threshold does not.
    dream = [
        [sorted(p.committed) for p in run(ScriptedBackend(fixed_script(targets, conf, 3)), 8, settings)[0]]
        for settings in (
            DiffusionSettings.reference(steps=4, schedule="timestep"),
            DiffusionSettings.reference(steps=4, schedule="timestep", spacing=1),
        )
    ]
    assert dream[0][1] == [3, 4] and dream[1][1] == [2, 4]
    confident, _ = run(
        ScriptedBackend(fixed_script(targets, conf, len(PROMPT))),
        8,
        DiffusionSettings.reference(threshold=0.85, spacing=1),
    )
    assert sorted(confident[0].committed) == [2, 3, 4, 5]


def test_spacing_keeps_the_end_of_text_rules() -> None:
    # A neighbour that spacing passed over still comes before end-of-text that a rule holds back.
    cases: tuple[tuple[EosRule, list[int]], ...] = (("in_order", [1, 2, EOS, EOS]), ("last", [1, 2, EOS, EOS]))
    for eos, targets in cases:
        conf = [0.8, 0.7, 0.99, 0.99]
        passes, done = run(
            ScriptedBackend(fixed_script(targets, conf, len(PROMPT))),
            4,
            DiffusionSettings.reference(steps=2, block_length=4, eos=eos, spacing=1),
        )
        assert sorted(passes[0].committed) == [0, 1], eos
        assert done.text == "bc"


def test_the_planned_pass_count_follows_the_passes_the_end_of_text_rule_adds() -> None:
    # End-of-text everywhere, committed in order: one position a pass, 16 passes where 4 were planned (the
    # status bar once read "pass 47 of 32"). Each pass's plan covers the passes run and those still to come.
    settings = DiffusionSettings.reference(steps=4, block_length=16, eos="in_order", stop_at_eos=False)
    passes, done = run(ScriptedBackend(fixed_script([EOS] * 16, [0.9] * 16, len(PROMPT))), 16, settings)
    assert isinstance(done.stats, DiffusionStats) and done.stats.passes == 16 > settings.steps
    planned = [p.planned_passes for p in passes]
    assert all(plan is not None and plan >= p.index + 1 for plan, p in zip(planned, passes, strict=True)), planned
    assert planned[-1] == 16
