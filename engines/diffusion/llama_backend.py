"""The llama.cpp backend: diffusion GGUFs (Dream, LLaDA, LLaDA-MoE, RND1) and our cacheable form.

llama.cpp's diffusion architectures are built without a KV cache, so every pass re-decodes the whole
sequence with non-causal attention. A cacheable file (Sharpen's own export, or a diffusion file's twin,
models/gguf_twin.py) is an ordinary architecture with `attention.causal = false` and a mask token:
llama.cpp keeps a KV cache for it, and this backend runs Fast-dLLM's caches on it. A window's first
pass decodes the whole sequence; under "prefix" its later passes decode from the window to the end,
with the keys and values before the window kept; under "dual" (Fast-dLLM's DualCache) those after the
window are kept too, so a later pass decodes the window alone. "dual" needs a llama.cpp that lets a
non-causal batch fill a gap between cached positions (Sharpen's build: scripts/llama-cpp-patches); on
another build it falls back to "prefix" and says so. Full re-decoding stays available as the reference
path (`cache="none"`).
"""

from __future__ import annotations

import ctypes
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import llama_cpp
import numpy as np
from llama_cpp import _internals

from engines.chat_template import render_instruction
from engines.diffusion.backend import CacheMode, KvChoice, block_start, generation_cache
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.errors import EngineError
from engines.llama_load import ContextShape, KvType, hold_sequences, open_llama, use_threads
from engines.messages import Instruction, plain_text
from engines.threads import Foreground, threads_for
from models.adapted import adapter_info, base_as_diffusion
from models.errors import UnsupportedModel
from models.gguf_info import GGUFInfo, inspect_gguf

# Models below this many parameters keep f32 keys and values under kv_type "auto".
SMALL_MODEL = 1_000_000_000
# The block cache's two sequences in llama.cpp's KV cache. A settled token is in both; a block being refined
# in REFINED alone, so it attends to everything settled, while a settled block decoded in the same batch
# (attending by SETTLED) never attends to it.
SETTLED, REFINED = 0, 1
EVERY_SEQUENCE = -1


def kv_type_for(choice: KvChoice, parameters: int) -> KvType:
    if choice != "auto":
        return choice
    return "f32" if parameters < SMALL_MODEL else "f16"


def check_diffusion_gguf(info: GGUFInfo) -> None:
    if info.is_diffusion:
        return
    if info.mask_token_id is None:
        detail = "it has no mask token (tokenizer.ggml.mask_token_id)"
    else:
        detail = f"its attention is causal ({info.architecture}.attention.causal is not false)"
    raise UnsupportedModel(
        info.path,
        f"is a {info.architecture!r} model, not a diffusion model: {detail}",
        "Drafts need a diffusion GGUF (Dream, LLaDA, LLaDA-MoE, RND1, or Sharpen's own export); "
        "set one with `sharpen config set models.draft PATH`.",
    )


NO_DUAL_CACHE = (
    "this llama.cpp build cannot decode a block between cached positions (it lacks Sharpen's patch, "
    "scripts/llama-cpp-patches), so the prefix cache is used instead of the dual cache"
)


class _Build:
    """What a backend's probe found about this llama.cpp build (None: none has probed yet)."""

    fills_gaps: bool | None = None
    # The order to give a settled token's two sequence ids in so that llama.cpp reads SETTLED first: a
    # token attends by the first id of its set, and llama.cpp keeps the set unordered. Empty: no order
    # does, and each settled block gets a clean pass of its own, everything in sequence 0.
    settled_ids: tuple[int, ...] | None = None


# Tokenizers whose reference composes text to NFC before splitting it (Qwen2's, as Dream uses); llama.cpp
# does not normalise, so "e" + U+0301 would tokenize unlike "é".
NFC_PRE_TOKENIZERS = frozenset({"qwen2"})


class LlamaDiffusionBackend:
    backend = "llama.cpp"

    def __init__(
        self,
        model_path: Path,
        settings: DiffusionLoadSettings | None = None,
        adapter: Path | None = None,
        foreground: Foreground | None = None,
    ) -> None:
        """`adapter`: a LoRA adapter of Sharpen's (models/adapted.py) that makes the AR file `model_path`
        a diffusion model, applied at load with the settings it names; the caller has verified the base."""
        self.settings = settings or DiffusionLoadSettings()
        self.foreground = foreground or Foreground()
        self.model_path = Path(model_path)
        self.adapter = adapter
        if adapter is None:
            self.gguf = inspect_gguf(self.model_path)
        else:
            self.gguf = base_as_diffusion(self.model_path, adapter_info(adapter))
        check_diffusion_gguf(self.gguf)
        self._llama = self._load()
        self._ctx = self._llama._ctx
        self._vocab = self._llama._model.vocab
        llama_cpp.llama_set_causal_attn(self._ctx.ctx, False)
        self.vocab_size = int(self._llama.n_vocab())
        self.context_length = min(self._llama.n_ctx(), self.settings.n_ctx)
        self.mask_token_id = self._mask_token_id()
        self.shift = 1 if self.gguf.shift_logits else 0
        self.block_causal = self.gguf.block_causal_length > 0
        self.eos_token_ids = frozenset(
            t for t in range(self.vocab_size) if llama_cpp.llama_vocab_is_eog(self._vocab, t)
        )
        self._batch = _internals.LlamaBatch(n_tokens=self.context_length, embd=0, n_seq_max=2, verbose=False)
        self.decoded_rows = 0  # positions decoded, over every pass of every draft (the probe's too)
        # Why the cache is not the one the settings ask for ("" when it is).
        self.cache_note = ""
        self.cache_mode = self._usable_cache()
        # What the cache holds keys and values for: the tokens before the window, the window's rows, and
        # (dual) the tokens after it.
        self._cached: list[int] = []
        self._window = (-1, -1)
        self._tail: list[int] = []
        # Block-causal: the settled tokens whose keys and values are final, and the logits of the last of
        # them (the first prediction of the next block, with a shift).
        self._settled: list[int] = []
        self._settled_row: np.ndarray | None = None
        self._block_length = 0
        self.full_passes = 0
        self.cached_passes = 0
        self.clean_passes = 0
        # Block cache: a settled block rides along with the next window's first pass where this build allows
        # (False: every settled block gets a pass of its own, the reference bench/block_diffusion.py times).
        self.ride_along = True
        self._mode: CacheMode = self.cache_mode

    # ----- loading -------------------------------------------------------------------------------

    def _load(self) -> llama_cpp.Llama:
        settings = self.settings
        # Non-causal attention needs the whole decoded window in one micro-batch.
        self.kv_type = kv_type_for(settings.kv_type, self.gguf.n_parameters)
        shape = ContextShape(
            settings.n_ctx,
            settings.n_ctx,
            settings.n_ctx,
            settings.n_threads,
            settings.n_gpu_layers,
            kv_type=self.kv_type,
        )
        hint = "Check that this llama.cpp build supports the architecture."
        if self.adapter is None:
            llama = open_llama(self.gguf, shape, hint)
        else:
            # Bidirectional from the start: llama.cpp sizes its batches and checks their positions by the
            # attention the context was created with.
            causal_off: dict[str, bool | int | float | str] = {f"{self.gguf.architecture}.attention.causal": False}
            llama = open_llama(self.gguf, shape, hint, lora=self.adapter, overrides=causal_off)
        hold_sequences(llama, 2)  # the block cache's SETTLED and REFINED
        return llama

    def _usable_cache(self) -> CacheMode:
        wanted = self.settings.cache
        if self._ctx.memory is None:  # llama.cpp keeps no KV cache for the file
            return "none"
        if self.gguf.block_causal_length and wanted != "block":
            # Full attention would run another model than the one trained; the block cache is also exact.
            self.cache_note = f"{self.model_path.name} was trained block-causally, so drafts use the block cache"
            wanted = "block"
        if wanted == "none":
            return "none"
        if wanted == "dual" or (wanted == "block" and not self.gguf.block_causal_length):
            # Dual runs only where llama.cpp fills gaps; block gives way to it for drafts with text after them.
            _Build.fills_gaps = self._fills_gaps()
            if wanted == "dual" and not _Build.fills_gaps:
                self.cache_note = NO_DUAL_CACHE
                return "prefix"
        return wanted

    @property
    def bidirectional_cache(self) -> CacheMode:
        """The best full-attention cache this build runs, for drafts block-causal attention cannot serve
        (text after them); "block" for a model trained block-causally, which never reads such text."""
        if self.cache_mode == "none" or self.gguf.block_causal_length:
            return self.cache_mode
        return "dual" if _Build.fills_gaps else "prefix"

    def _fills_gaps(self) -> bool:
        """Whether llama.cpp accepts a non-causal batch into a gap of the cached positions: decode two
        tokens, drop the first from the cache, and decode it again."""
        try:
            self._decode([self.mask_token_id] * 2, 0, None, None)
            self._ctx.kv_cache_seq_rm(0, 0, 1)
            batch = self._batch.batch
            batch.n_tokens, batch.token[0], batch.pos[0], batch.logits[0] = 1, self.mask_token_id, 0, True
            batch.n_seq_id[0], batch.seq_id[0][0] = 1, 0
            return llama_cpp.llama_decode(self._ctx.ctx, batch) == 0
        finally:
            self._ctx.kv_cache_clear()

    def _mask_token_id(self) -> int:
        from_vocab = int(llama_cpp.llama_vocab_mask(self._vocab))
        mask = self.gguf.mask_token_id if self.gguf.mask_token_id is not None else from_vocab
        if mask is None or mask < 0 or mask >= self.vocab_size:
            raise UnsupportedModel(self.model_path, "has no usable mask token", "The file's metadata is incomplete.")
        return mask

    # ----- text ----------------------------------------------------------------------------------

    def tokenize(self, text: str, *, add_bos: bool, special: bool = False) -> list[int]:
        if not text:
            return []
        if self.gguf.tokenizer_pre in NFC_PRE_TOKENIZERS:
            text = unicodedata.normalize("NFC", text)
        return self._llama.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special)

    def instruction_tokens(self, instruction: Instruction) -> list[int]:
        """The prompt for an instruction, through the model's chat template where it has one."""
        template = self.gguf.chat_template
        if template is None:
            return self.tokenize(plain_text(instruction), add_bos=True)
        rendered = render_instruction(
            template,
            instruction,
            bos_text=self._token_text(self.gguf.bos_token_id),
            eos_text=self._token_text(self.gguf.eos_token_id),
        )
        return self.tokenize(rendered.text, add_bos=not rendered.has_bos, special=True)

    def _token_text(self, token_id: int | None) -> str:
        return "" if token_id is None else self._llama._model.token_get_text(token_id)

    def piece(self, token_id: int) -> str:
        return self.decode([token_id])

    def decode(self, tokens: Sequence[int]) -> str:
        return self._llama.detokenize(list(tokens)).decode("utf-8", errors="replace")

    # ----- logits --------------------------------------------------------------------------------

    def reset(self, cache: bool = True, block_length: int = 0, suffix: bool = False) -> CacheMode:
        self._cached, self._window, self._tail = [], (-1, -1), []
        self._settled, self._settled_row = [], None
        self._block_length = block_length
        self._mode = generation_cache(self.cache_mode, cache, suffix, self.bidirectional_cache)
        if self._mode == "block" and _Build.settled_ids is None:
            _Build.settled_ids = self._probe_settled_ids()
        self._ctx.kv_cache_clear()
        return self._mode

    def _probe_settled_ids(self) -> tuple[int, ...]:
        """The order of a settled token's ids under which it does not attend to a refined token beside it
        in the batch: its logits equal those computed without the refined token."""
        settled, refined = [0, 1 % self.vocab_size], [self.mask_token_id]
        try:
            self._ctx.kv_cache_clear()
            alone = self._decode(settled, 0, 1, 2)
            for ids in ((REFINED, SETTLED), (SETTLED, REFINED)):
                self._ctx.kv_cache_clear()
                beside = self._decode(settled + refined, 0, 1, 2, shared=len(settled), settled_ids=ids)
                if np.allclose(beside, alone, rtol=0.0, atol=1e-2):
                    return ids
            return ()
        except EngineError:  # a build that refuses a token in two sequences: each block keeps its own pass
            return ()
        finally:
            self._ctx.kv_cache_clear()

    def logits(self, sequence: np.ndarray, start: int, end: int, stable: int) -> np.ndarray:
        if len(sequence) > self.context_length:
            raise EngineError(
                f"the sequence ({len(sequence)} tokens) is longer than the context ({self.context_length})"
            )
        first_row = start - self.shift
        if first_row < 0:
            raise EngineError("a model that shifts its logits needs at least one token before the canvas")
        tokens = [int(t) for t in sequence]
        use_threads(self._llama, threads_for(self.settings.n_threads, foreground_busy=self.foreground.busy()))
        if self._mode == "block":
            return self._block_logits(tokens[:end], start)
        if self._mode == "none":
            self._ctx.kv_cache_clear()
            return self._decode(tokens, 0, first_row, end - self.shift)
        dual = self._mode == "dual"
        # Dual: the window's rows are decoded between the cached ones; prefix: from the window to the end.
        decoded_end = end if dual else len(tokens)
        tail = tokens[end:] if dual else []
        if self._window != (first_row, end) or self._cached != tokens[:first_row] or self._tail != tail:
            # A new window (a block starts): a full pass answers this step, and the keys and values it
            # computed outside the window, with the whole sequence in view, are kept for the window's later
            # passes (Fast-dLLM's prefix and dual caches).
            self._ctx.kv_cache_clear()
            rows = self._decode(tokens, 0, first_row, end - self.shift)
            self._window, self._cached, self._tail = (first_row, end), tokens[:first_row], tail
            self.full_passes += 1
        else:
            rows = self._decode(tokens[first_row:decoded_end], first_row, first_row, end - self.shift)
            self.cached_passes += 1
        self._ctx.kv_cache_seq_rm(0, first_row, decoded_end if dual else -1)
        return rows

    def _block_logits(self, tokens: list[int], start: int) -> np.ndarray:
        """Block-causal: bring the settled blocks' keys and values up to date, then decode the window's block
        against them. The block before the window, once settled, rides along with the window's first pass:
        its clean rows (SETTLED and REFINED) and the window's (REFINED) in one batch, which saves a pass's
        fixed cost. Other settled blocks (the prompt's, on the first call) get a clean pass each, as every
        settled block does where this build cannot keep the two apart (`_Build.settled_ids`). `tokens` ends
        with the window."""
        block = self._block_length
        lo = block_start(start, block)
        end = len(tokens)
        if end - lo > block:
            raise EngineError(f"a block-causal window must lie in one block of {block}")
        settled = len(self._settled)
        if settled > lo or self._settled != tokens[:settled]:
            self._ctx.kv_cache_clear()
            self._settled, self._settled_row, settled = [], None, 0
        # Drop the cells of the block's earlier passes: they were computed from tokens since changed.
        self._forget_from(settled)
        ids = (_Build.settled_ids or ()) if self.ride_along else ()
        riding = max(settled, lo - block) if ids else lo  # where the block riding along starts
        while settled < riding:
            upto = min(riding, block_start(settled, block) + block)
            clean = self._decode(tokens[settled:upto], settled, upto - 1, upto, shared=upto - settled, settled_ids=ids)
            self._settled_row, self._settled, settled = clean[0].copy(), tokens[:upto], upto
            self.clean_passes += 1
        first_row = start - self.shift
        if riding < lo:
            # From the riding block's last row on: with shifted logits it predicts the window's first
            # position, and stays that prediction for the block's later passes.
            rows = self._decode(
                tokens[riding:end], riding, lo - 1, end - self.shift, shared=lo - riding, settled_ids=ids
            )
            self._settled_row, self._settled = rows[0].copy(), tokens[:lo]
            self.clean_passes += 1
            self.cached_passes += 1
            return rows[first_row - (lo - 1) :]
        rows = self._decode(tokens[lo:end], lo, max(first_row, lo), end - self.shift, shared=0, settled_ids=ids)
        self.cached_passes += 1
        if first_row < lo:
            # A block's first prediction sits on the settled block's last row (shifted logits): fixed since
            # that block's clean pass.
            if self._settled_row is None:
                raise EngineError("a model that shifts its logits needs at least one token before the canvas")
            rows = np.concatenate((self._settled_row[None, :], rows))
        return rows

    def _forget_from(self, position: int) -> None:
        # Not LlamaContext.kv_cache_seq_rm: it turns sequence -1 (every sequence) into 0.
        if self._ctx.memory is not None:
            llama_cpp.llama_memory_seq_rm(self._ctx.memory, EVERY_SEQUENCE, position, -1)

    def _decode(
        self,
        tokens: list[int],
        position: int,
        row_lo: int | None,
        row_hi: int | None,
        *,
        shared: int = 0,
        settled_ids: tuple[int, ...] = (),
    ) -> np.ndarray:
        """Decode `tokens` at `position`; return logits for absolute rows [row_lo, row_hi). With `settled_ids`
        (the block cache's), the first `shared` tokens are settled, in those sequences, and the rest are
        refined (REFINED); without, every token is in sequence 0."""
        batch = self._batch.batch
        batch.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = position + i
            ids = (settled_ids if i < shared else (REFINED,)) if settled_ids else (0,)
            batch.n_seq_id[i] = len(ids)
            for k, sequence in enumerate(ids):
                batch.seq_id[i][k] = sequence
            absolute = position + i
            batch.logits[i] = row_lo is not None and row_hi is not None and row_lo <= absolute < row_hi
        if row_lo is None or row_hi is None or row_hi <= row_lo:
            batch.logits[len(tokens) - 1] = True  # llama.cpp computes at least one output
        code = llama_cpp.llama_decode(self._ctx.ctx, batch)
        self.decoded_rows += len(tokens)
        if code != 0:
            raise EngineError(f"llama.cpp failed to decode {len(tokens)} tokens (code {code})")
        if row_lo is None or row_hi is None or row_hi <= row_lo:
            return np.empty((0, self.vocab_size), dtype=np.float32)
        # Flagged rows are consecutive in the batch, so their logits are consecutive in llama.cpp's
        # output buffer (also when the architecture outputs every row).
        pointer = llama_cpp.llama_get_logits_ith(self._ctx.ctx, row_lo - position)
        n_rows = row_hi - row_lo
        array = np.ctypeslib.as_array(
            ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), shape=(n_rows, self.vocab_size)
        )
        return array.copy()


def fills_gaps(probe_model: Path) -> bool:
    """Whether this llama.cpp build runs the dual cache: what a backend's probe found, or else a probe now
    on `probe_model` (a small cacheable file)."""
    if _Build.fills_gaps is None:
        LlamaDiffusionBackend(probe_model, DiffusionLoadSettings(n_ctx=64, n_gpu_layers=0))
    return bool(_Build.fills_gaps)


def runnable_cache(wanted: CacheMode) -> CacheMode:
    """The cache a cacheable file runs with under `wanted`, as far as known without loading a model:
    "prefix" for "dual" once a probe has found this build without the patch."""
    return "prefix" if wanted == "dual" and _Build.fills_gaps is False else wanted
