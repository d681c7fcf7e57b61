"""The knobs of a diffusion draft, validated against the canvas they will run on."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import asdict, dataclass
from typing import Any, Literal

from engines.errors import InvalidRequestError
from engines.options import at_least, between, from_options, option, options

Algorithm = Literal["confidence", "margin", "entropy", "random", "origin"]
Schedule = Literal["blocks", "timestep"]
EosRule = Literal["in_order", "free", "last"]
Sampler = Literal["sharpen", "sdar", "fast_dllm_v2"]
ALGORITHMS: tuple[Algorithm, ...] = typing.get_args(Algorithm)
SCHEDULES: tuple[Schedule, ...] = typing.get_args(Schedule)
EOS_RULES: tuple[EosRule, ...] = typing.get_args(EosRule)
SAMPLERS: tuple[Sampler, ...] = typing.get_args(Sampler)
# Which engines read an option a draft sets (`read_by`): the AR drafter takes a draft's temperature, top_p and
# seed (app/orchestration/drafters.py), and nothing else of these.
DIFFUSION_ONLY = ("diffusion",)
BOTH_ENGINES = ("ar", "diffusion")


@dataclass(frozen=True)
class DiffusionSettings:
    """How a canvas is refined. Each option is declared here once: the config's [diffusion] section, the
    draft commands' flags and the service read these declarations, and the defaults are the ones users get.

    schedule "blocks" is LLaDA's semi-autoregressive decoding: the canvas is cut into blocks of
    `block_length`, refined left to right, `steps` passes shared among the blocks. "timestep" is
    Dream's: the whole canvas at once, unmasking a share 1 - s/t of the masks at each step of a
    schedule from t = 1 down to `eps`. With `threshold` set, a pass commits every masked position whose
    token probability reaches it (at least one per pass, as in Fast-dLLM), so the number of passes
    follows the text and `steps` is ignored.

    `sampler` "sdar" and "fast_dllm_v2" are the authors' own loops for those block-causal models
    (engines/diffusion/block_samplers.py), on the blocks schedule: they decide what a pass commits by
    themselves, so `algorithm`, `eos`, `spacing`, `no_doubled_words` and `blank_lines` do not apply.
    "sdar" is SDAR's generate: each block gets steps // blocks denoising steps and commits
    get_num_transfer_tokens(block_length, those steps) per step, the most confident first, or (with
    `threshold`: low_confidence_dynamic) every position above the threshold where there are at least that
    many; the draft stops after a block in which end-of-text settled. "fast_dllm_v2" is Fast-dLLM v2's:
    blocks refined in sub-blocks of `sub_block` in turn, each pass committing the sub-block's masks above
    `threshold` plus the most confident one (none set: that one only), and a block's first position
    committed greedily from the previous block's last row.
    """

    # In the order traces and `--json` have always listed them.
    steps: int = option(
        64, "refinement passes K for fixed-step decoding", at_least(1), metavar="K", read_by=DIFFUSION_ONLY
    )
    schedule: Schedule = option(
        "blocks", "blocks (LLaDA, semi-autoregressive) or timestep (Dream)", read_by=DIFFUSION_ONLY
    )
    block_length: int = option(
        32, "block length for the blocks schedule", at_least(1), metavar="B", read_by=DIFFUSION_ONLY
    )
    eps: float = 1e-3
    algorithm: Algorithm = option("confidence", "which masked positions to commit first", read_by=DIFFUSION_ONLY)
    threshold: float | None = option(
        None,
        "commit every position at least this confident per pass; 0 is off",
        between(0.0, 1.0),
        off=0.0,
        metavar="T",
        read_by=DIFFUSION_ONLY,
    )
    temperature: float = option(0.0, "sampling temperature; 0 is greedy", between(0.0, 2.0), read_by=BOTH_ENGINES)
    top_k: int = option(0, "sample among the k most likely tokens; 0 is off", at_least(0), read_by=DIFFUSION_ONLY)
    top_p: float = option(
        1.0, "sample within this probability mass; 1 is off", between(0.01, 1.0), read_by=BOTH_ENGINES
    )
    seed: int = option(0, "random seed; the same seed repeats a draft exactly", at_least(0), read_by=BOTH_ENGINES)
    # Where end-of-text may be committed. "free": like any token (LLaDA's reference). "last": ranked after
    # every other proposal. "in_order": only at the first masked position, so the draft ends where its
    # text has reached: a model that is surest of the padding at the canvas's end cannot commit it
    # there first and let it spread leftwards over the whole draft.
    eos: EosRule = option(
        "in_order",
        "where end-of-text may settle: in_order (only where the text has reached), free, or last",
        read_by=DIFFUSION_ONLY,
    )
    # With a fixed pass budget, a pass commits no two positions within `spacing` of each other unless too
    # few far-apart masked positions remain (0: off, LLaDA's reference). Positions filled in the same pass
    # are guessed independently, and neighbours depend on each other most ("you you"); a pass later, the
    # neighbour is conditioned on what settled. Threshold decoding ignores it (what it commits is
    # confident), and so does the random "origin" rule.
    spacing: int = option(
        3,
        "with fixed steps, a pass settles no two positions this close unless too few far-apart masks remain; 0 is off",
        between(0, 64),
        metavar="D",
        read_by=DIFFUSION_ONLY,
    )
    # Positions filled in parallel, or by a model unsure of itself, repeat what the draft already says ("the
    # beauty of the beauty of"); engines/repeats.py takes such tokens out of a pass's proposals.
    no_repeat_ngram: int = option(
        0,
        "a pass never proposes a token that would repeat a run of this many tokens already in the draft; 0 is off",
        between(0, 16),
        metavar="N",
        read_by=DIFFUSION_ONLY,
    )
    # Neighbours settled in one pass are guessed independently and often take the same word ("the lesson
    # lesson plan"): engines/diffusion/doubled_words.py gives such a position its next likeliest token.
    # Off by default: at fixed passes it trades sharpen-draft's loops for runs of dashes and commas
    # (training/NOTES.md). The embedded drafter's catalogue entry turns it on with its 0.9 threshold, where
    # the words it replaces are the odd slips of settled text.
    no_doubled_words: bool = option(
        False, 'a pass never settles a word beside the same word ("the the"); false allows it', read_by=DIFFUSION_ONLY
    )
    # Drafters that run out of text pad with newlines and lone brackets ("[\n\n[\n\n["):
    # engines/diffusion/blank_lines.py keeps a pass from settling a token that makes the run too long.
    blank_lines: int = option(
        2,
        "a pass never settles a token that makes more than this many empty or one-character lines in a row; 0 is off",
        between(0, 16),
        metavar="N",
        read_by=DIFFUSION_ONLY,
    )
    # Stop as soon as the settled text reaches an end-of-text token (LLaDA's reference code always
    # runs every step instead; benchmarks that measure a fixed amount of work turn this off).
    stop_at_eos: bool = True
    sampler: Sampler = option(
        "sharpen",
        "whose decoding loop: sharpen (Sharpen's: schedule, algorithm, eos, spacing, no_doubled_words and "
        "blank_lines apply), or the authors' for block-causal models, which ignore those: sdar (SDAR's "
        "generate) or fast_dllm_v2 (Fast-dLLM v2's)",
        read_by=DIFFUSION_ONLY,
    )
    sub_block: int = option(
        8,
        "fast_dllm_v2: the sub-blocks a block is refined in, in turn",
        at_least(1),
        metavar="S",
        read_by=DIFFUSION_ONLY,
    )

    @classmethod
    def reference(cls, **changes: Any) -> DiffusionSettings:
        """LLaDA's and Dream's own behaviour (end-of-text like any token, no spacing, repeats, doubled
        words and blank lines allowed), for comparisons with the authors' code and for benchmarks of a fixed
        amount of work."""
        reference: dict[str, Any] = {
            "eos": "free",
            "spacing": 0,
            "no_repeat_ngram": 0,
            "no_doubled_words": False,
            "blank_lines": 0,
        }
        return cls(**(reference | changes))

    @classmethod
    def taken_from(cls, source: Any, **overrides: Any) -> DiffusionSettings:
        """The options copied by name from `source` (the config's [diffusion] section), then the overrides
        that are not None; an override spelt as an option's `off` value turns it off."""
        unknown = set(overrides) - {item.name for item in dataclasses.fields(cls)}
        if unknown:
            raise TypeError(f"no such draft settings: {', '.join(sorted(unknown))}")
        values = {item.name: getattr(source, item.name) for item in options(cls)}
        values |= {name: value for name, value in overrides.items() if value is not None}
        return cls(**{name: from_options(value, cls.__dataclass_fields__[name]) for name, value in values.items()})

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
        if self.sampler not in SAMPLERS:
            problems.append(f"sampler must be one of {', '.join(SAMPLERS)}, got {self.sampler!r}")
        elif self.sampler != "sharpen" and self.schedule != "blocks":
            problems.append(f"sampler {self.sampler} decodes block by block: schedule must be blocks, not timestep")
        if self.sub_block < 1:
            problems.append(f"sub_block must be at least 1, got {self.sub_block}")
        if self.block_length < 1:
            problems.append(f"block length must be at least 1, got {self.block_length}")
        fixed_steps = self.threshold is None and self.sampler == "sharpen"
        # SDAR's per-block commit counts follow the steps, with or without a threshold.
        if self.steps < 1 and (fixed_steps or self.sampler == "sdar"):
            problems.append(f"steps must be at least 1, got {self.steps}")
        elif fixed_steps and self.schedule == "blocks" and self.steps < self.n_blocks(canvas_length):
            problems.append(
                f"steps ({self.steps}) must be at least the number of blocks "
                f"({self.n_blocks(canvas_length)} blocks of {self.block_length} in {canvas_length} tokens)"
            )
        if self.threshold is not None and not 0.0 < self.threshold <= 1.0:
            problems.append(f"threshold must be in (0, 1], got {self.threshold}")
        if self.no_repeat_ngram == 1 or not 0 <= self.no_repeat_ngram <= 16:
            problems.append(f"no_repeat_ngram must be 0 (off) or from 2 to 16, got {self.no_repeat_ngram}")
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
