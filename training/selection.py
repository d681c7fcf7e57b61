"""How a training run ranks its adapters: in one place for the run that keeps its best
(training/adapt/run.py) and for the GPU trip that brings the best run's back (training/gpu_payload.py).
Standard library only, as the trip's first steps on the GPU machine are."""

from __future__ import annotations

import math

# The run's best adapter, kept beside its latest: at the highest one-pass accuracy on the unseen pairs where the run
# has them (the measure), else at the lowest held-out loss.
BEST_ADAPTER_NAME = "best-sharpen-draft-lora.gguf"


def adapter_rank(unseen_one_pass: float, heldout_loss: float) -> tuple[float, float]:
    """Lower is better: the higher one-pass accuracy on the unseen pairs, ties to the lower held-out loss; a
    figure not logged (NaN: a run without unseen pairs, or a row from before the column) ranks last."""
    return (
        math.inf if math.isnan(unseen_one_pass) else -unseen_one_pass,
        math.inf if math.isnan(heldout_loss) else heldout_loss,
    )
