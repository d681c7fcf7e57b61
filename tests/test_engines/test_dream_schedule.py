"""Dream's timestep schedule as its paper and code define it: a step commits int(m * (1 - s/t)) of the m
masked positions (t, s from linspace(1, eps, steps + 1); all that are left at the last step), and a step
whose count is 0 leaves the canvas as it was, so Sharpen runs no forward pass for it."""

from __future__ import annotations

import numpy as np
import pytest
from scripted_backend import EOS, MASK, VOCAB, ScriptedBackend

from engines.diffusion.sampler import DiffusionSampler
from engines.diffusion.schedule import timestep_commits
from engines.diffusion.settings import DiffusionSettings
from engines.events import DiffusionStats, Done, Pass

PROMPT = [0, 1, 2]


def published_counts(canvas: int, steps: int, eps: float) -> list[int]:
    """Per-step commits of Dream's schedule from the formula, in float32 as Dream computes it: t_i = 1 +
    i (eps - 1) / steps (from eps down for the second half of the steps, as torch.linspace does)."""
    n = steps + 1
    stride = (np.float32(eps) - np.float32(1)) / np.float32(steps)
    timesteps = [
        np.float32(1) + stride * np.float32(i) if i < n // 2 else np.float32(eps) - stride * np.float32(steps - i)
        for i in range(n)
    ]
    masked, counts = canvas, []
    for i in range(steps):
        share = np.float32(1) - timesteps[i + 1] / timesteps[i]
        count = masked if i == steps - 1 else int(np.float32(masked) * share)
        counts.append(count)
        masked -= count
    return counts


def sharpen_counts(canvas: int, steps: int, eps: float) -> list[int]:
    masked, counts = canvas, []
    for step in range(steps):
        count = timestep_commits(masked, step, steps, eps)
        counts.append(count)
        masked -= count
    return counts


@pytest.mark.parametrize("eps", [1e-3, 1e-4, 1e-2, 0.1])
def test_the_per_step_counts_are_the_published_formula(eps: float) -> None:
    cases = 0
    for canvas in [*range(1, 70), 96, 128, 255, 256, 512]:
        for steps in sorted({1, 2, 3, 4, 8, 16, 32, 64, canvas, max(1, canvas // 2), max(1, canvas // 4), 2 * canvas}):
            assert sharpen_counts(canvas, steps, eps) == published_counts(canvas, steps, eps), (canvas, steps)
            cases += 1
    assert cases > 800
    # The examples: 8 positions in 8 steps, and in 16 (9 of those steps commit nothing).
    assert published_counts(8, 8, 1e-3) == [0, 1, 1, 1, 1, 1, 1, 2]
    assert published_counts(8, 16, 1e-3).count(0) == 9


def content_logits(sequence: np.ndarray, start: int, end: int) -> np.ndarray:
    """Logits that depend on the whole sequence (as a bidirectional model's do), never favouring the mask."""
    rng = np.random.default_rng(int(np.sum(sequence * np.arange(1, len(sequence) + 1))) % 2**32)
    rows = rng.normal(0, 2, size=(end - start, VOCAB))
    rows[:, MASK] = -30.0
    rows[:, EOS] -= 3.0
    return rows


def dream_reference(canvas: int, steps: int, eps: float) -> list[np.ndarray]:
    """Dream's loop written from the algorithm: a forward pass every step, the count's most confident
    masked positions committed (greedy). The canvas after every step."""
    sequence = np.array([*PROMPT, *[MASK] * canvas])
    counts = published_counts(canvas, steps, eps)
    after: list[np.ndarray] = []
    for i in range(steps):
        masked = np.flatnonzero(sequence == MASK)
        logits = content_logits(sequence, len(PROMPT), len(sequence))[masked - len(PROMPT)]
        logits[:, MASK] = -np.inf
        probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        tokens, confidence = probabilities.argmax(axis=1), probabilities.max(axis=1)
        count = counts[i]
        best = np.argsort(-confidence, kind="stable")[:count]
        sequence[masked[best]] = tokens[best]
        after.append(sequence[len(PROMPT) :].copy())
    return after


@pytest.mark.parametrize(("canvas", "steps"), [(8, 8), (8, 16), (16, 16), (31, 31), (15, 15), (12, 5), (20, 40)])
def test_a_dream_draft_equals_the_reference_pass_for_pass_and_skips_empty_steps(canvas: int, steps: int) -> None:
    eps = 1e-3
    settings = DiffusionSettings.reference(schedule="timestep", steps=steps, stop_at_eos=False)
    backend = ScriptedBackend(content_logits)
    events = list(DiffusionSampler(backend).generate(PROMPT, canvas, settings))
    done = events[-1]
    assert isinstance(done, Done) and isinstance(done.stats, DiffusionStats)
    passes = [e for e in events if isinstance(e, Pass)]
    counts = published_counts(canvas, steps, eps)
    reference = dream_reference(canvas, steps, eps)
    committing = [i for i, count in enumerate(counts) if count]
    assert [list(p.canvas) for p in passes] == [list(reference[i]) for i in committing]
    assert [len(p.committed) for p in passes] == [counts[i] for i in committing]
    assert list(done.stats.skipped_steps) == [i for i, count in enumerate(counts) if not count]
    assert len(backend.calls) == len(committing) == done.stats.passes, "no forward pass for an empty step"


def test_the_counts_match_torch_up_to_its_vectorised_rounding() -> None:
    """Against the authors' own arithmetic (torch.linspace, float32): equal, except where torch's CPU
    kernel rounds a vectorised t differently and m * (1 - s/t) sits on a whole number."""
    torch = pytest.importorskip("torch")
    schedules = differing = 0
    for eps in (1e-3, 1e-2):
        for canvas in [*range(1, 65), 128, 256]:
            for steps in sorted({8, 16, 32, 64, canvas, max(1, canvas // 2), 2 * canvas}):
                timesteps = torch.linspace(1, eps, steps + 1)
                masked, theirs = canvas, []
                for i in range(steps):
                    share = 1 - timesteps[i + 1] / timesteps[i]
                    count = int(torch.tensor(masked) / 1 * share) if i < steps - 1 else masked
                    if count != timestep_commits(masked, i, steps, eps):
                        exact = masked * float(share)
                        assert abs(exact - round(exact)) < 1e-4, (canvas, steps, i, exact)
                    theirs.append(count)
                    masked -= count
                schedules += 1
                differing += theirs != sharpen_counts(canvas, steps, eps)
    assert schedules > 800 and differing <= schedules // 100
