"""The knobs of a diffusion draft, validated against the canvas they will run on."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from engines.errors import InvalidRequestError

Algorithm = Literal["confidence", "margin", "entropy", "random", "origin"]
Schedule = Literal["blocks", "timestep"]
ALGORITHMS: tuple[Algorithm, ...] = ("confidence", "margin", "entropy", "random", "origin")
SCHEDULES: tuple[Schedule, ...] = ("blocks", "timestep")
EosRule = Literal["in_order", "free", "last"]
EOS_RULES: tuple[EosRule, ...] = ("in_order", "free", "last")


@dataclass(frozen=True)
class DiffusionSettings:
    """How a canvas is refined.

    schedule "blocks" is LLaDA's semi-autoregressive decoding: the canvas is cut into blocks of
    `block_length`, refined left to right, `steps` passes shared among the blocks. "timestep" is
    Dream's: the whole canvas at once, unmasking a share 1 - s/t of the masks at each step of a
    schedule from t = 1 down to `eps`. With `threshold` set, a pass commits every masked position whose
    token probability reaches it (at least one per pass, as in Fast-dLLM), so the number of passes
    follows the text and `steps` is ignored.
    """

    steps: int = 64
    schedule: Schedule = "blocks"
    block_length: int = 32
    eps: float = 1e-3
    algorithm: Algorithm = "confidence"
    threshold: float | None = None
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    # Where end-of-text may be committed. "free": like any token (LLaDA's reference). "last": ranked after
    # every other proposal. "in_order": only at the first masked position, so the draft ends where its
    # text has reached: a model that is surest of the padding at the canvas's end cannot commit it
    # there first and let it spread leftwards over the whole draft.
    eos: EosRule = "free"
    # With a fixed pass budget, a pass commits no two positions within `spacing` of each other unless too
    # few far-apart masked positions remain (0: off, LLaDA's reference). Positions filled in the same pass
    # are guessed independently, and neighbours depend on each other most ("you you"); a pass later, the
    # neighbour is conditioned on what settled. Threshold decoding ignores it (what it commits is
    # confident), and so does the random "origin" rule.
    spacing: int = 0
    # Stop as soon as the settled text reaches an end-of-text token (LLaDA's reference code always
    # runs every step instead; benchmarks that measure a fixed amount of work turn this off).
    stop_at_eos: bool = True

    def checked(self, canvas_length: int) -> DiffusionSettings:
        """Return self if it can run on a canvas of this length, else raise InvalidRequestError."""
        problems: list[str] = []
        if canvas_length < 1:
            problems.append(f"the draft length must be at least 1 token, got {canvas_length}")
        if self.eos not in EOS_RULES:
            problems.append(f"eos must be one of {', '.join(EOS_RULES)}, got {self.eos!r}")
        if self.algorithm not in ALGORITHMS:
            problems.append(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}")
        if self.schedule not in SCHEDULES:
            problems.append(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.block_length < 1:
            problems.append(f"block length must be at least 1, got {self.block_length}")
        if self.threshold is None:
            if self.steps < 1:
                problems.append(f"steps must be at least 1, got {self.steps}")
            elif self.schedule == "blocks" and self.steps < self.n_blocks(canvas_length):
                problems.append(
                    f"steps ({self.steps}) must be at least the number of blocks "
                    f"({self.n_blocks(canvas_length)} blocks of {self.block_length} in {canvas_length} tokens)"
                )
        elif not 0.0 < self.threshold <= 1.0:
            problems.append(f"threshold must be in (0, 1], got {self.threshold}")
        if self.spacing < 0:
            problems.append(f"spacing must be at least 0 (0 is off), got {self.spacing}")
        if self.temperature < 0:
            problems.append(f"temperature must be at least 0, got {self.temperature}")
        if self.top_k < 0:
            problems.append(f"top_k must be at least 0 (0 is off), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            problems.append(f"top_p must be in (0, 1], got {self.top_p}")
        if not 0.0 < self.eps < 1.0:
            problems.append(f"eps must be in (0, 1), got {self.eps}")
        if problems:
            raise InvalidRequestError("; ".join(problems))
        return self

    def n_blocks(self, canvas_length: int) -> int:
        return -(-canvas_length // self.block_length)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
