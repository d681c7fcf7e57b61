"""The torch backend: Hugging Face LLaDA and Dream checkpoints behind the DiffusionBackend protocol.

Three ways to answer a pass, switchable (`cache`):
- "none": every pass runs the whole sequence (the reference; a block-causal model's, up to the window's
  end under its mask);
- "prefix" (Fast-dLLM's prefix cache): when the sampler moves to a new window (a new block), one full
  pass stores every layer's keys and values; until the window moves again, passes run only the positions
  from the window on and attend to the stored keys and values of everything before it;
- "dual" (Fast-dLLM's dual cache): as "prefix", but the positions after the window (the masked tail,
  an infill suffix) are stored too, so a pass runs only the window itself.
The stored keys and values go stale as the window's tokens change: that is the approximation Fast-dLLM
makes, and what `bench/diffusion.py --torch` measures (agreement with "none").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from engines.diffusion.backend import CACHE_MODES, CacheMode, block_start, generation_cache
from engines.diffusion.hf.loading import LoadedModel, TorchSetupError, load_transformer
from engines.diffusion.hf.tokenizer import CheckpointTokenizer
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.errors import EngineError
from engines.messages import Instruction
from engines.threads import Foreground, cpu_load, threads_for
from models.hf_checkpoint import CheckpointInfo, inspect_checkpoint
from models.transformer import LayerKV, Mask, block_causal_mask


@dataclass(frozen=True)
class _Settled:
    """Block-causal: the settled tokens, their final keys and values, and the hidden state of the last."""

    tokens: np.ndarray
    context: list[LayerKV] | None
    last_hidden: torch.Tensor | None

    @property
    def length(self) -> int:
        return len(self.tokens)

    def extended(self, tokens: np.ndarray, computed: list[LayerKV], last_hidden: torch.Tensor) -> _Settled:
        if self.context is None:
            return _Settled(tokens.copy(), computed, last_hidden)
        context = [
            LayerKV(torch.cat((old.keys, new.keys), dim=2), torch.cat((old.values, new.values), dim=2))
            for old, new in zip(self.context, computed, strict=True)
        ]
        return _Settled(tokens.copy(), context, last_hidden)


def _riding_mask(riding: int, clean: int, end: int, device: torch.device | str) -> torch.Tensor:
    """Attention (rows, keys) for a batch of positions riding..end-1 whose first `clean` are a settled
    block: every row sees the settled keys before the batch, and the settled block's rows never see the
    window's."""
    rows = end - riding
    mask = torch.ones(rows, riding + rows, dtype=torch.bool, device=device)
    mask[:clean, riding + clean :] = False
    return mask


@dataclass
class _Window:
    """What the stored keys and values were computed for."""

    start: int  # first position recomputed on cached passes
    end: int  # first position after the window ("dual" stores from here on)
    tokens: np.ndarray  # the sequence when they were stored
    context: list[LayerKV]


class TorchDiffusionBackend:
    backend = "torch"

    def __init__(
        self,
        checkpoint: Path | str,
        settings: DiffusionLoadSettings | None = None,
        foreground: Foreground | None = None,
    ) -> None:
        self.settings = settings or DiffusionLoadSettings()
        self.foreground = foreground or Foreground()
        if self.settings.cache not in CACHE_MODES:
            raise TorchSetupError(
                f"the torch cache must be one of {', '.join(CACHE_MODES)}; got {self.settings.cache!r}"
            )
        self.info: CheckpointInfo = inspect_checkpoint(checkpoint)
        self.model_path = self.info.path
        self.spec = self.info.spec
        self.tokenizer = CheckpointTokenizer(self.info.path)
        self.loaded: LoadedModel = load_transformer(self.info, self.settings)
        self.device = self.loaded.device
        self.mask_token_id = self.spec.mask_token_id
        self.vocab_size = self.spec.vocab_size
        self.context_length = min(self.settings.n_ctx, self.spec.context_length)
        self.shift = 1 if self.spec.shift_logits else 0
        self.eos_token_ids = self.tokenizer.end_of_text_ids([*self.spec.eos_token_ids, *self._generation_eos()])
        # A model trained block-causally (SDAR, Fast-dLLM v2) attends block-causally under every cache: "block"
        # in place of the full-attention caches, and full passes under its mask.
        self.block_causal = self.spec.block_causal_length > 0
        self.cache_mode: CacheMode = (
            "block" if self.block_causal and self.settings.cache != "none" else self.settings.cache
        )
        self.cache_note = (
            f"{self.info.path.name} was trained block-causally, so drafts use the block cache"
            if self.cache_mode != self.settings.cache
            else ""
        )
        cpu_load()  # starts sampling other work's load before the first draft
        self._window: _Window | None = None
        self._settled: _Settled | None = None
        self._block_length = 0
        self._mode: CacheMode = self.cache_mode
        self.full_passes = 0
        self.cached_passes = 0
        self.clean_passes = 0

    def _generation_eos(self) -> list[int]:
        path = self.info.path / "generation_config.json"
        try:
            value = json.loads(path.read_text(encoding="utf-8")).get("eos_token_id")
        except (OSError, json.JSONDecodeError, AttributeError):
            return []
        return [int(v) for v in (value if isinstance(value, list) else [value]) if v is not None]

    # ----- text ----------------------------------------------------------------------------------

    def tokenize(self, text: str, *, add_bos: bool, special: bool = False) -> list[int]:
        return self.tokenizer.encode(text, add_bos=add_bos)

    def instruction_tokens(self, instruction: Instruction) -> list[int]:
        return self.tokenizer.instruction_tokens(instruction)

    def piece(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id])

    def decode(self, tokens: Sequence[int]) -> str:
        return self.tokenizer.decode(tokens)

    # ----- logits --------------------------------------------------------------------------------

    def reset(self, cache: bool = True, block_length: int = 0, suffix: bool = False) -> CacheMode:
        self._window, self._settled = None, None
        self._block_length = block_length
        self._mode = generation_cache(self.cache_mode, cache, suffix, "block" if self.block_causal else "dual")
        # torch's thread count is the process's: chosen per draft, as llama.cpp's is per pass.
        threads = threads_for(self.settings.n_threads, foreground_busy=self.foreground.busy())
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
        return self._mode

    @torch.inference_mode()
    def logits(self, sequence: np.ndarray, start: int, end: int, stable: int) -> np.ndarray:
        length = len(sequence)
        if length > self.context_length:
            raise EngineError(f"the sequence ({length} tokens) is longer than the context ({self.context_length})")
        first_row = start - self.shift
        if first_row < 0:
            raise EngineError("a model that shifts its logits needs at least one token before the canvas")
        last_row = end - self.shift
        tokens = np.asarray(sequence, dtype=np.int64)
        if self._mode == "block":
            return self._block_logits(tokens[:end], start)
        if self._mode == "none":
            if self.block_causal:
                # The mask the model was trained with, blocks counted from the sequence's start; what follows
                # the window is never read (as under "block"), so it is not decoded.
                block = self._block_length or self.spec.block_causal_length
                hidden, _ = self._run(tokens, 0, end, None, block_causal_mask(end, block, self.device))
            else:
                hidden, _ = self._run(tokens, 0, length, None)
            self.full_passes += 1
            return self._rows(hidden[:, first_row:last_row])
        # The window covers the rows asked for and every position whose token may change in this window
        # (with a shift, the last changing position sits one past the last row).
        window_end = end if self._mode == "dual" else length
        if not self._window_valid(tokens, first_row, window_end):
            # A new window: one full pass answers this step and stores everything for the next ones.
            hidden, computed = self._run(tokens, 0, length, None)
            outside = [
                LayerKV(
                    torch.cat((kv.keys[:, :, :first_row], kv.keys[:, :, window_end:]), dim=2),
                    torch.cat((kv.values[:, :, :first_row], kv.values[:, :, window_end:]), dim=2),
                )
                for kv in computed
            ]
            self._window = _Window(first_row, window_end, tokens.copy(), outside)
            self.full_passes += 1
            return self._rows(hidden[:, first_row:last_row])
        assert self._window is not None
        hidden, _ = self._run(tokens, first_row, window_end, self._window.context)
        self.cached_passes += 1
        return self._rows(hidden[:, : last_row - first_row])

    def _block_logits(self, tokens: np.ndarray, start: int) -> np.ndarray:
        """Block-causal: a clean pass for each aligned block settled since the last call (the prompt's
        whole blocks on the first), each attending to the settled keys and values before it; then the
        window's block alone against them. The block before the window, once settled, rides along with the
        window's first pass instead: one batch, its rows kept from seeing the window's. `tokens` ends with
        the window."""
        block = self._block_length
        lo = block_start(start, block)
        end = len(tokens)
        if end - lo > block:
            raise EngineError(f"a block-causal window must lie in one block of {block}")
        settled = self._settled
        if settled is None or settled.length > lo or not np.array_equal(settled.tokens, tokens[: settled.length]):
            settled = _Settled(np.empty(0, dtype=np.int64), None, None)
        riding = max(settled.length, lo - block)
        while settled.length < riding:
            upto = min(riding, block_start(settled.length, block) + block)
            hidden, computed = self._run(tokens, settled.length, upto, settled.context)
            settled = settled.extended(tokens[:upto], computed, hidden[:, -1:])
            self.clean_passes += 1
        first_row, last_row = start - self.shift, end - self.shift
        if riding < lo:
            clean = lo - riding
            mask = _riding_mask(riding, clean, end, self.device)
            hidden, computed = self._run(tokens, riding, end, settled.context, mask)
            kept = [LayerKV(kv.keys[:, :, :clean], kv.values[:, :, :clean]) for kv in computed]
            self._settled = settled.extended(tokens[:lo], kept, hidden[:, clean - 1 : clean])
            self.clean_passes += 1
            self.cached_passes += 1
            return self._rows(hidden[:, first_row - riding : last_row - riding])
        self._settled = settled
        hidden, _ = self._run(tokens, lo, end, settled.context)
        self.cached_passes += 1
        if first_row >= lo:
            return self._rows(hidden[:, first_row - lo : last_row - lo])
        # A block's first prediction sits on the settled block's last row (shifted logits): fixed since
        # that block's clean pass.
        if settled.last_hidden is None:
            raise EngineError("a model that shifts its logits needs at least one token before the canvas")
        return self._rows(torch.cat((settled.last_hidden, hidden[:, : last_row - lo]), dim=1))

    def _window_valid(self, tokens: np.ndarray, start: int, end: int) -> bool:
        window = self._window
        if window is None or window.start != start or window.end != end or len(window.tokens) != len(tokens):
            return False
        # Everything outside the window must be what the stored keys and values were computed from.
        return bool(
            np.array_equal(window.tokens[:start], tokens[:start]) and np.array_equal(window.tokens[end:], tokens[end:])
        )

    def _run(
        self, tokens: np.ndarray, lo: int, hi: int, context: list[LayerKV] | None, mask: Mask = None
    ) -> tuple[torch.Tensor, list[LayerKV]]:
        ids = torch.from_numpy(tokens[lo:hi]).to(self.device)[None, :]
        positions = torch.arange(lo, hi, device=self.device)
        return self.loaded.model(ids, positions, context, mask)

    def _rows(self, hidden: torch.Tensor) -> np.ndarray:
        return self.loaded.model.logits(hidden)[0].float().cpu().numpy()
