"""A finished draft's figures, the same for either engine, so two drafts of one request compare on one scale: who
wrote it, how long it took, how fast it wrote and in how many steps (an AR draft's tokens, a diffusion draft's
passes). The editor's candidate labels and `sharpen compare` both read them."""

from __future__ import annotations

from dataclasses import dataclass

from engines.events import DiffusionStats, GenerationStats
from router.request import EngineName

ENGINE_LABELS: dict[EngineName, str] = {"ar": "AR", "diffusion": "diffusion"}


def other_engine(engine: EngineName) -> EngineName:
    return "diffusion" if engine == "ar" else "ar"


@dataclass(frozen=True)
class DraftFigures:
    engine: EngineName
    model: str
    tokens: int
    # From the call to the last token or pass, the prompt's evaluation included: what the writer waited.
    seconds: float
    # The steps it took: an AR draft's tokens (one a step), a diffusion draft's passes.
    steps: int

    @classmethod
    def of(cls, engine: EngineName, model: str, stats: GenerationStats | DiffusionStats) -> DraftFigures:
        steps = stats.passes if isinstance(stats, DiffusionStats) else stats.generated_tokens
        return cls(engine, model, stats.generated_tokens, stats.total_s, steps)

    @property
    def tokens_per_s(self) -> float:
        """Tokens written a second, start to end (an AR draft's prompt evaluation counted in, as a diffusion
        draft's first pass is)."""
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def steps_text(self) -> str:
        """ "24 passes" (diffusion) or "96 steps" (AR, a token a step)."""
        if self.engine == "diffusion":
            return f"{self.steps} pass{'' if self.steps == 1 else 'es'}"
        return f"{self.steps} step{'' if self.steps == 1 else 's'}"

    def label(self) -> str:
        """ "AR · 3.2 s · 29.9 tok/s": the engine, its time, its speed."""
        return f"{ENGINE_LABELS[self.engine]} · {self.seconds:.1f} s · {self.tokens_per_s:.1f} tok/s"
