"""SDAR and Fast-dLLM v2 as real models on the torch backend, and their authors' samplers.

The checkpoints are tiny and random, written at test time in the real layouts (tests/fixture_checkpoints.py).
Their logits are checked against an independent, plain-torch forward pass of the Qwen3 / Qwen2.5 layers
read by the checkpoints' own tensor names. The authors' loops (JetAstra/SDAR generate.py
`block_diffusion_generate`; Fast-dLLM v2's `generate`) are written out below from their published code over
the raw model, each pass a full re-decode under an explicit block-causal mask, and Sharpen's canvases
must equal theirs pass for pass.

SDAR samples at every step (its temperature divides), so its greedy cases are the argmax variant of its
loop: the argmax with its softmax probability as the confidence, which is what Sharpen's temperature 0
does; its own sampler runs exactly where it is deterministic: top_k = 1, every confidence then 1.0. Sharpen
draws with numpy, not torch.multinomial, so sampled runs cannot be compared draw for draw; the filtered
distribution they draw from is compared instead. As everywhere in Sharpen, the mask token is never
proposed, and the references leave it out too.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from fixture_checkpoints import MASK_ID, fast_dllm_v2_config, sdar_config, write_checkpoint
from safetensors.numpy import load_file
from scripted_backend import EOS, ScriptedBackend, fixed_script
from torch.nn import functional as F

from engines.diffusion.backend import CacheMode
from engines.diffusion.block_samplers import authors_proposals
from engines.diffusion.engine import DiffusionEngine
from engines.diffusion.hf.backend import TorchDiffusionBackend
from engines.diffusion.load_settings import DiffusionLoadSettings
from engines.diffusion.sampler import SUFFIX_UNSEEN, DiffusionSampler, block_bounds
from engines.diffusion.settings import DiffusionSettings
from engines.errors import InvalidRequestError
from engines.events import DiffusionStats, Done, Pass
from models.errors import UnsupportedModel
from models.hf_checkpoint import inspect_checkpoint, spec_from_config
from models.transformer import block_causal_mask

INSTRUCTION = "Write a short note to Sam about the 3 meetings on Friday."
BEFORE = "Dear Sam,\n\nThanks for the agenda"


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("block-models")
    return {name: write_checkpoint(root / name, name, seed=7) for name in ("sdar", "fast_dllm_v2")}


def backend(folder: Path, cache: CacheMode = "block", quantization: str = "none") -> TorchDiffusionBackend:
    settings = DiffusionLoadSettings(quantization=quantization, cache=cache, n_ctx=512)
    return TorchDiffusionBackend(folder, settings)


# ----- the checkpoints --------------------------------------------------------------------------


def test_both_load_by_their_real_names_and_record_their_block_length(folders: dict[str, Path]) -> None:
    sdar = inspect_checkpoint(folders["sdar"]).spec
    assert (sdar.architecture, sdar.qk_norm, sdar.qkv_bias, sdar.shift_logits, sdar.tied_output) == (
        "sdar",
        True,
        False,
        False,
        False,
    )
    assert (sdar.head_dim, sdar.attention_width, sdar.block_causal_length, sdar.mask_token_id) == (32, 128, 4, MASK_ID)
    v2 = inspect_checkpoint(folders["fast_dllm_v2"]).spec
    assert (v2.architecture, v2.qk_norm, v2.qkv_bias, v2.shift_logits, v2.tied_output) == (
        "fast_dllm_v2",
        False,
        True,
        True,
        True,
    )
    assert (v2.head_dim, v2.block_causal_length, v2.mask_token_id) == (16, 32, MASK_ID)
    assert inspect_checkpoint(folders["sdar"]).summary()["block_causal_length"] == 4
    loaded = backend(folders["sdar"])
    stored = load_file(str(folders["sdar"] / "model.safetensors"))
    model = loaded.loaded.model
    assert torch.equal(
        model.get_parameter("blocks.1.attention.k_norm.weight"),
        torch.from_numpy(stored["model.layers.1.self_attn.k_norm.weight"]),
    )
    assert torch.equal(model.get_parameter("output.weight"), torch.from_numpy(stored["lm_head.weight"]))
    # SDAR's stop ids are its generation_config's: <|im_end|> and <|endoftext|>.
    assert {0, 2} <= loaded.eos_token_ids


@pytest.mark.parametrize("architecture", ["sdar", "fast_dllm_v2"])
def test_the_module_computes_the_authors_layers(folders: dict[str, Path], architecture: str) -> None:
    """Sharpen's module under block_causal_mask against the Qwen3 / Qwen2.5 layers written out in torch from
    the checkpoint's tensors by their own names (q and k norms, head_dim, biases, tied head)."""
    folder = folders[architecture]
    ours = backend(folder, cache="none")
    tokens = np.array(ours.instruction_tokens(INSTRUCTION), dtype=np.int64)
    block = ours.spec.block_causal_length
    with torch.inference_mode():
        hidden, _ = ours.loaded.model(
            torch.from_numpy(tokens)[None, :], torch.arange(len(tokens)), None, block_causal_mask(len(tokens), block)
        )
        got = ours.loaded.model.logits(hidden)[0].numpy()
    expected = qwen_logits(folder, tokens, block)
    assert np.abs(got - expected).max() < 1e-4


def qwen_logits(folder: Path, tokens: np.ndarray, block: int) -> np.ndarray:
    config = json.loads((folder / "config.json").read_text())
    w = {name: torch.from_numpy(array) for name, array in load_file(str(folder / "model.safetensors")).items()}
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    eps, n = config["rms_norm_eps"], len(tokens)

    def rms(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def linear(x: torch.Tensor, name: str) -> torch.Tensor:
        bias = w.get(name.replace(".weight", ".bias"))
        return x @ w[name].T + (0 if bias is None else bias)

    inverse = 1.0 / config["rope_theta"] ** (torch.arange(0, head_dim, 2).double() / head_dim)
    angles = torch.arange(n).double()[:, None] * inverse[None, :]
    cos, sin = torch.cat((angles, angles), -1).cos().float(), torch.cat((angles, angles), -1).sin().float()

    def rope(x: torch.Tensor) -> torch.Tensor:
        half = head_dim // 2
        return x * cos + torch.cat((-x[..., half:], x[..., :half]), -1) * sin

    visible = (torch.arange(n)[None, :] // block) <= (torch.arange(n)[:, None] // block)
    x = w["model.embed_tokens.weight"][torch.from_numpy(tokens)]
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = rms(x, w[p + "input_layernorm.weight"])
        q = linear(h, p + "self_attn.q_proj.weight").view(n, heads, head_dim).transpose(0, 1)
        k = linear(h, p + "self_attn.k_proj.weight").view(n, kv_heads, head_dim).transpose(0, 1)
        v = linear(h, p + "self_attn.v_proj.weight").view(n, kv_heads, head_dim).transpose(0, 1)
        if p + "self_attn.q_norm.weight" in w:
            q, k = rms(q, w[p + "self_attn.q_norm.weight"]), rms(k, w[p + "self_attn.k_norm.weight"])
        q, k = rope(q), rope(k)
        k, v = k.repeat_interleave(heads // kv_heads, 0), v.repeat_interleave(heads // kv_heads, 0)
        scores = (q @ k.transpose(1, 2)) / head_dim**0.5
        attended = scores.masked_fill(~visible, float("-inf")).softmax(-1) @ v
        x = x + linear(attended.transpose(0, 1).reshape(n, heads * head_dim), p + "self_attn.o_proj.weight")
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        x = x + linear(
            F.silu(linear(h, p + "mlp.gate_proj.weight")) * linear(h, p + "mlp.up_proj.weight"),
            p + "mlp.down_proj.weight",
        )
    head = w["model.embed_tokens.weight"] if config["tie_word_embeddings"] else w["lm_head.weight"]
    return (rms(x, w["model.norm.weight"]) @ head.T).numpy()


@pytest.mark.parametrize("quantization", ["nf4", "int8"])
def test_sdar_loads_quantized_and_drafts_block_by_block(folders: dict[str, Path], quantization: str) -> None:
    import bitsandbytes as bnb

    quantized = backend(folders["sdar"], quantization=quantization)
    layer_type = bnb.nn.Linear4bit if quantization == "nf4" else bnb.nn.Linear8bitLt
    assert sum(isinstance(m, layer_type) for m in quantized.loaded.model.modules()) == 2 * 7
    assert quantized.loaded.model.get_parameter("blocks.0.attention.q_norm.weight").dtype == torch.float32
    done = drafted(quantized, 16, DiffusionSettings(block_length=4, steps=16, stop_at_eos=False))[-1]
    assert isinstance(done, Done) and isinstance(done.stats, DiffusionStats) and done.stats.cache == "block"


@pytest.mark.parametrize("architecture", ["sdar", "fast_dllm_v2"])
def test_both_draft_through_the_engine_with_the_block_cache(folders: dict[str, Path], architecture: str) -> None:
    ours = backend(folders[architecture])
    block = ours.spec.block_causal_length
    for sampler in ("sharpen", architecture):
        settings = DiffusionSettings(sampler=sampler, block_length=block, steps=40, threshold=0.5)  # type: ignore[arg-type]
        events = drafted(ours, 40, settings)
        done = events[-1]
        assert isinstance(done, Done) and isinstance(done.stats, DiffusionStats)
        assert done.stats.cache == "block" and done.stats.passes == len(events) - 1 > 0
    assert ours.clean_passes > 0


def drafted(ours: object, length: int, settings: DiffusionSettings, before: str = "") -> list[Pass | Done]:
    engine = DiffusionEngine(ours, "block-models")  # type: ignore[arg-type]  # a torch backend or a reference
    return list(engine.draft(INSTRUCTION, length, settings, before=before))


def canvases(ours: TorchDiffusionBackend, length: int, settings: DiffusionSettings, before: str) -> list[list[int]]:
    return [list(e.canvas) for e in drafted(ours, length, settings, before) if isinstance(e, Pass)]


# ----- the configs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "switch"),
    [
        (sdar_config(attention_bias=True), "attention_bias"),
        (sdar_config(hidden_act="gelu"), "hidden_act"),
        (sdar_config(rope_scaling={"rope_type": "yarn", "factor": 4.0}), "rope_scaling"),
        (fast_dllm_v2_config(use_sliding_window=True), "use_sliding_window"),
    ],
)
def test_a_switch_sharpen_does_not_compute_is_refused_by_name(
    tmp_path: Path, config: dict[str, object], switch: str
) -> None:
    with pytest.raises(UnsupportedModel, match=rf"sets {switch} = .*does not compute"):
        spec_from_config(config, tmp_path)


def test_the_mask_is_found_by_its_text_else_the_released_id() -> None:
    real_vocab = {"vocab_size": 151936}
    assert spec_from_config(sdar_config(**real_vocab), Path("x"), {}).mask_token_id == 151669
    assert spec_from_config(sdar_config(**real_vocab), Path("x"), {"<MASK>": 151700}).mask_token_id == 151700
    assert spec_from_config(fast_dllm_v2_config(**real_vocab), Path("x"), {}).mask_token_id == 151665
    assert spec_from_config(fast_dllm_v2_config(**real_vocab), Path("x"), {"|<MASK>|": 7}).mask_token_id == 7
    by_type = sdar_config(tie_word_embeddings=True, model_type="sdar", architectures=[], **real_vocab)
    tied = spec_from_config(by_type, Path("x"), {})
    assert tied.tied_output and tied.architecture == "sdar" and tied.block_causal_length == 4
    with pytest.raises(UnsupportedModel, match="nor an SDAR or Fast-dLLM v2 one"):
        spec_from_config(sdar_config(architectures=["SDARMoeForCausalLM"], model_type="sdar_moe"), Path("x"), {})


def test_memory_estimates_count_the_explicit_head_width(folders: dict[str, Path]) -> None:
    for folder in folders.values():
        info = inspect_checkpoint(folder)
        assert info.memory().weights["fp32"] == 4 * info.parameter_count


# ----- the authors' loops, written out ----------------------------------------------------------


class Reference:
    """The raw model, every pass a full re-decode of positions [0, end) under block_causal_mask."""

    def __init__(self, ours: TorchDiffusionBackend, block: int) -> None:
        self.model, self.block = ours.loaded.model, block
        self.eos = ours.eos_token_ids

    def logits(self, x: np.ndarray, end: int) -> np.ndarray:
        with torch.inference_mode():
            mask = block_causal_mask(end, self.block)
            hidden, _ = self.model(torch.from_numpy(x[:end])[None, :], torch.arange(end), None, mask)
            logits = self.model.logits(hidden)[0].double().numpy().copy()
        logits[:, MASK_ID] = -np.inf
        return logits


def sample(logits: np.ndarray, temperature: float, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """SDAR's sample_with_temperature_topk_topp (top_p 1), in torch; temperature 0: the argmax variant."""
    tensor = torch.from_numpy(logits)
    if temperature == 0:
        probabilities = tensor.softmax(-1)
        tokens = probabilities.argmax(-1)
    else:
        if temperature != 1.0:
            tensor = tensor / temperature
        if top_k > 0:
            kth = torch.topk(tensor, top_k).values[..., -1, None]
            tensor = torch.where(tensor < kth, torch.full_like(tensor, float("-inf")), tensor)
        probabilities = tensor.softmax(-1)
        tokens = torch.multinomial(probabilities, 1)[:, 0]
    return tokens.numpy(), probabilities.gather(-1, tokens[:, None])[:, 0].numpy()


def transfer_counts(block: int, steps: int) -> list[int]:
    """SDAR's get_num_transfer_tokens."""
    return [block // steps + (1 if i < block % steps else 0) for i in range(steps)]


def sdar_generate(
    ref: Reference,
    x: np.ndarray,
    prompt: int,
    steps: int,
    threshold: float | None,
    temperature: float = 0.0,
    top_k: int = 0,
    cap: bool = True,
) -> tuple[list[list[int]], int]:
    """block_diffusion_generate: blocks from the prompt's last (partial) one, each with `steps` steps of
    get_num_transfer_tokens commits (low_confidence_static without a threshold, _dynamic with one). `cap`
    False is SDAR's code as published: its top-k may pick settled positions and write over them (counted)."""
    block, canvases, rewrites = ref.block, [], 0
    counts = transfer_counts(block, steps)
    for lo in range(prompt // block * block, len(x), block):
        hi = lo + block
        for step in range(steps + 1):
            masked = x[lo:hi] == MASK_ID
            if not masked.any():
                break
            tokens, probabilities = sample(ref.logits(x, hi)[lo:hi], temperature, top_k)
            confidence = np.where(masked, probabilities, -np.inf)
            count = min(counts[step], int(masked.sum())) if cap else counts[step]
            high = confidence > threshold if threshold is not None else None
            if high is not None and high.sum() >= count:
                transfer = high
            else:
                transfer = np.zeros(block, dtype=bool)
                transfer[np.argsort(-confidence, kind="stable")[:count]] = True
            rewrites += int((transfer & ~masked).sum())
            x[lo:hi][transfer] = tokens[transfer]
            canvases.append(x[prompt:].tolist())
    return canvases, rewrites


def fast_dllm_v2_generate(
    ref: Reference, x: np.ndarray, prompt: int, sub: int, threshold: float | None
) -> list[list[int]]:
    """generate: blocks from the prompt's last one; a block's first token, where it is not the prompt's,
    is the argmax of the previous block's clean pass's last row; then sub-blocks in order, each step
    running the whole block, its logits shifted (row j - 1 predicts position j), greedy, committing the
    sub-block's masks above the threshold and always the most confident one."""
    block, canvases = ref.block, []
    for lo in range(prompt // block * block, len(x), block):
        hi = lo + block
        if x[lo] == MASK_ID:
            x[lo] = int(np.argmax(ref.logits(x, lo)[lo - 1]))
            canvases.append(x[prompt:].tolist())
        for sub_lo in range(lo, hi, sub):
            while (masked := x[sub_lo : sub_lo + sub] == MASK_ID).any():
                logits = torch.from_numpy(ref.logits(x, hi)[sub_lo - 1 : sub_lo + sub - 1])
                probabilities = logits.softmax(-1)
                tokens = probabilities.argmax(-1).numpy()
                confidence = np.where(masked, probabilities.max(-1).values.numpy(), -np.inf)
                unmask = confidence > threshold if threshold is not None else np.zeros(sub, dtype=bool)
                unmask[np.argmax(confidence)] = True
                unmask &= masked
                x[sub_lo : sub_lo + sub][unmask] = tokens[unmask]
                canvases.append(x[prompt:].tolist())
    return canvases


def layout(ours: TorchDiffusionBackend, before: str, block: int, want: int) -> tuple[np.ndarray, int, int]:
    """The engine's prompt for INSTRUCTION and `before`, and a canvas of about `want` that ends on a block
    boundary, as the authors' loops pad their last block to a whole one."""
    prompt = ours.instruction_tokens(INSTRUCTION) + (ours.tokenize(before, add_bos=False) if before else [])
    length = -(-(len(prompt) + want) // block) * block - len(prompt)
    return np.array([*prompt, *[MASK_ID] * length], dtype=np.int64), len(prompt), length


SDAR_CASES = [
    # (block, steps per block, threshold, temperature, top_k, text before the canvas)
    (4, 4, None, 0.0, 0, ""),
    (4, 2, None, 0.0, 0, BEFORE),
    (8, 4, None, 0.0, 0, BEFORE),
    (4, 4, 0.85, 0.0, 0, BEFORE),
    (4, 3, 0.1, 0.0, 0, ""),
    (8, 8, 0.15, 0.0, 0, BEFORE),
    (4, 4, 0.85, 1.0, 1, ""),  # SDAR's own sampler, deterministic: every confidence is 1.0
    (8, 2, None, 0.7, 1, BEFORE),
]


def test_sdar_equals_its_generate_pass_for_pass(folders: dict[str, Path]) -> None:
    ours = backend(folders["sdar"])
    committed_many = False
    for block, steps, threshold, temperature, top_k, before in SDAR_CASES:
        x, prompt, length = layout(ours, before, block, 24)
        expected, _ = sdar_generate(Reference(ours, block), x, prompt, steps, threshold, temperature, top_k)
        windows = len(block_bounds(length, block, prompt))
        settings = DiffusionSettings.reference(
            sampler="sdar",
            block_length=block,
            steps=steps * windows,
            threshold=threshold,
            temperature=temperature,
            top_k=top_k,
            stop_at_eos=False,
        )
        assert canvases(ours, length, settings, before) == expected, (block, steps, threshold, top_k, before)
        committed_many |= len(expected) < length
    assert committed_many, "no case committed more than one position in a pass"


def test_sdar_caps_where_its_top_k_would_rewrite_settled_positions(folders: dict[str, Path]) -> None:
    """Two steps a block (2 commits each): on a block whose first position is the prompt's (3 masks), and
    after a dynamic step that committed 3 of 4, the second step asks for 2 of the 1 mask left. SDAR's
    torch.topk then also takes a settled position (the prompt's, or a committed one) and samples it again;
    Sharpen commits the one mask left."""
    ours = backend(folders["sdar"])
    for threshold, before, want in ((None, before_leaving(ours, 3, 4), 16), (0.15, "", 32)):
        x, prompt, length = layout(ours, before, 4, want)
        ref = Reference(ours, 4)
        _, rewrites = sdar_generate(ref, x.copy(), prompt, 2, threshold, cap=False)
        assert rewrites > 0, "the case must be one where SDAR's code rewrites"
        expected, none = sdar_generate(ref, x.copy(), prompt, 2, threshold)
        windows = len(block_bounds(length, 4, prompt))
        settings = DiffusionSettings.reference(
            sampler="sdar", block_length=4, steps=2 * windows, threshold=threshold, stop_at_eos=False
        )
        got = canvases(ours, length, settings, before)
        assert none == 0 and got == expected
        for earlier, later in itertools.pairwise(got):
            assert all(a in (MASK_ID, b) for a, b in zip(earlier, later, strict=True)), "a settled token changed"


@pytest.mark.parametrize(("block", "sub", "before"), [(8, 4, ""), (16, 8, BEFORE), (32, 8, "")])
def test_fast_dllm_v2_equals_its_generate_pass_for_pass(
    folders: dict[str, Path], block: int, sub: int, before: str
) -> None:
    ours = backend(folders["fast_dllm_v2"])
    for threshold in (0.9, 1.0, None):
        x, prompt, length = layout(ours, before, block, 40)
        expected = fast_dllm_v2_generate(Reference(ours, block), x, prompt, sub, threshold)
        settings = DiffusionSettings.reference(
            sampler="fast_dllm_v2", block_length=block, sub_block=sub, threshold=threshold, stop_at_eos=False
        )
        assert canvases(ours, length, settings, before) == expected, (block, sub, threshold)
        if threshold == 0.9:
            assert len(expected) < length, "0.9 committed one position a pass: the case tests nothing"


def test_fast_dllm_v2_takes_a_block_start_from_the_prompts_last_row(folders: dict[str, Path]) -> None:
    """A prompt that ends on a block boundary: the canvas's first token is the argmax of the prompt's
    clean pass, committed alone before the block's first step (Fast-dLLM v2's prefill)."""
    ours = backend(folders["fast_dllm_v2"])
    before = before_leaving(ours, 8, 8)
    x, start, length = layout(ours, before, 8, 24)
    assert start % 8 == 0
    expected = fast_dllm_v2_generate(Reference(ours, 8), x, start, 4, 0.9)
    settings = DiffusionSettings.reference(
        sampler="fast_dllm_v2", block_length=8, sub_block=4, threshold=0.9, stop_at_eos=False
    )
    events = drafted(ours, length, settings, before)
    passes = [e for e in events if isinstance(e, Pass)]
    assert [list(p.canvas) for p in passes] == expected
    assert passes[0].committed == (0,) and passes[0].window == (0, 1)


def before_leaving(ours: TorchDiffusionBackend, masks: int, block: int) -> str:
    """Text before the canvas that leaves `masks` positions of the prompt's last block to the canvas."""
    prompt = len(ours.instruction_tokens(INSTRUCTION))
    for words in range(1, 40):
        text = " ".join(["Thanks"] * words)
        if -(prompt + len(ours.tokenize(text, add_bos=False))) % block == masks % block:
            return text
    raise AssertionError("no such text")


# ----- diffusion.cache = none: full re-decodes of the same model -----------------------------------

# (prompt tokens, block length): prompts ending mid-block and on a boundary.
UNCACHED_LAYOUTS = [(7, 4), (8, 4), (10, 4), (7, 8), (8, 8), (10, 8)]


def uncached_settings(sampler: str, block: int) -> DiffusionSettings:
    if sampler == "sdar":
        return DiffusionSettings.reference(sampler="sdar", block_length=block, steps=20, stop_at_eos=False)
    if sampler == "fast_dllm_v2":
        return DiffusionSettings.reference(
            sampler="fast_dllm_v2", block_length=block, sub_block=2, threshold=0.3, stop_at_eos=False
        )
    return DiffusionSettings.reference(block_length=block, steps=10, stop_at_eos=False)


def pass_by_pass(
    ours: TorchDiffusionBackend, prompt: list[int], settings: DiffusionSettings, suffix: list[int]
) -> tuple[list[tuple[object, ...]], DiffusionStats]:
    """Each pass's canvas, commits and window, and the draft's stats."""
    events = list(DiffusionSampler(ours).generate(prompt, 14, settings, suffix=suffix))
    done = events[-1]
    assert isinstance(done, Done) and isinstance(done.stats, DiffusionStats)
    return [(e.canvas, e.committed, e.window) for e in events if isinstance(e, Pass)], done.stats


@pytest.mark.parametrize("architecture", ["sdar", "fast_dllm_v2"])
def test_no_cache_drafts_what_the_block_cache_drafts_pass_by_pass(folders: dict[str, Path], architecture: str) -> None:
    """diffusion.cache = none re-decodes the sequence at every pass under the block-causal mask the model
    was trained with, blocks counted from the sequence's start (as the authors' loops count them): the same
    model as the block cache, so the same canvases pass by pass, for Sharpen's sampler and the authors',
    wherever the prompt ends; with text after the draft too, which both say they did not see."""
    cached, uncached = backend(folders[architecture]), backend(folders[architecture], cache="none")
    assert (cached.cache_mode, uncached.cache_mode) == ("block", "none")
    tokens = cached.instruction_tokens(INSTRUCTION)
    suffix = cached.tokenize(" Best, Ana", add_bos=False)
    runs: list[tuple[int, int, str, list[int]]]
    runs = [(n, block, sampler, []) for n, block in UNCACHED_LAYOUTS for sampler in ("sharpen", architecture)]
    runs += [(7, 4, architecture, suffix), (10, 8, "sharpen", suffix)]
    for prompt_tokens, block, sampler, after in runs:
        settings = uncached_settings(sampler, block)
        expected, with_cache = pass_by_pass(cached, tokens[:prompt_tokens], settings, after)
        got, without = pass_by_pass(uncached, tokens[:prompt_tokens], settings, after)
        assert (with_cache.cache, without.cache) == ("block", "none")
        assert got == expected, (prompt_tokens, block, sampler, len(after))
        assert without.cache_note == with_cache.cache_note == (SUFFIX_UNSEEN if after else "")
    assert uncached.full_passes > 0 and uncached.clean_passes == uncached.cached_passes == 0


@pytest.mark.parametrize("architecture", ["sdar", "fast_dllm_v2"])
def test_no_cache_reads_nothing_after_the_window(folders: dict[str, Path], architecture: str) -> None:
    """Text after the draft that shares an aligned block with the draft's last positions: the block cache
    never reads past the window, and a full re-decode must not either, else those rows see the text."""
    cached, uncached = backend(folders[architecture]), backend(folders[architecture], cache="none")
    words = cached.tokenize(" ".join(["Thanks for the agenda, Sam."] * 4), add_bos=False)
    # Prompt 7, canvas 16 (settled but its last 3), a suffix of 5: block [20, 24) holds 3 masks and the suffix.
    prompt, canvas, suffix = cached.instruction_tokens(INSTRUCTION)[:7], words[:13] + [MASK_ID] * 3, words[13:18]
    sequence = np.array([*prompt, *canvas, *suffix], dtype=np.int64)
    for ours in (cached, uncached):
        assert ours.reset(cache=True, block_length=4, suffix=True) == ours.cache_mode
    expected = cached.logits(sequence, 20, 23, 20)
    assert np.abs(uncached.logits(sequence, 20, 23, 20) - expected).max() < 1e-4


@pytest.mark.parametrize("cache", ["prefix", "dual"])
def test_full_attention_caches_give_way_to_the_block_cache_and_say_so(
    folders: dict[str, Path], cache: CacheMode
) -> None:
    """Fast-dLLM's prefix and dual caches keep keys and values computed with full attention: another model
    than the one trained block-causally. The block cache, exact for it, runs instead."""
    ours = backend(folders["sdar"], cache=cache)
    assert ours.cache_mode == "block" and "trained block-causally" in ours.cache_note
    done = drafted(ours, 12, DiffusionSettings.reference(block_length=4, steps=6, stop_at_eos=False))[-1]
    assert isinstance(done, Done) and isinstance(done.stats, DiffusionStats) and done.stats.cache == "block"


# ----- the samplers' arithmetic -----------------------------------------------------------------


def scripted_draft(settings: DiffusionSettings, targets: list[int], confidence: list[float]) -> Iterator[Pass | Done]:
    scripted = ScriptedBackend(fixed_script(targets, confidence, offset=2))
    return DiffusionSampler(scripted).generate([0, 1], len(targets), settings)


def test_sdar_stops_once_a_block_with_end_of_text_is_complete() -> None:
    """End-of-text settles second in its block: Sharpen's own sampler stops there, SDAR's fills the block
    first and never starts the next one; the text ends at end-of-text either way."""
    targets, confidence = [0, EOS, 1, 2, 3, 4, 5, 6], [0.9, 0.95, 0.5, 0.4, 0.9, 0.9, 0.9, 0.9]
    own = list(scripted_draft(DiffusionSettings.reference(block_length=4, steps=8), targets, confidence))
    sdar = list(scripted_draft(DiffusionSettings(sampler="sdar", block_length=4, steps=8), targets, confidence))
    assert len(own) - 1 == 2 and len(sdar) - 1 == 4
    for events in (own, sdar):
        done = events[-1]
        assert isinstance(done, Done) and done.text == "a" and done.stats.finish_reason == "eos"


def test_fast_dllm_v2_commits_a_blocks_first_token_alone_and_greedily() -> None:
    targets, confidence = [3, 4, 5, 6, 7, 8, 9, 0], [0.3] * 8
    settings = DiffusionSettings(
        sampler="fast_dllm_v2", block_length=4, sub_block=2, temperature=1.5, seed=3, stop_at_eos=False
    )
    scripted = ScriptedBackend(fixed_script(targets, confidence, offset=2))
    passes = [e for e in DiffusionSampler(scripted).generate([0, 1], 8, settings) if isinstance(e, Pass)]
    firsts = [p for p in passes if p.window in ((0, 1), (4, 5))]
    assert [p.committed for p in firsts] == [(0,), (4,)] and [p.canvas[p.committed[0]] for p in firsts] == [3, 7]
    asked = [(call.start - 2, call.end - 2) for call in scripted.calls]
    assert (0, 1) in asked and (4, 5) in asked and all(p.window[1] - p.window[0] <= 2 for p in passes)


def test_the_authors_filters_keep_ties_and_report_the_filtered_probability() -> None:
    """What SDAR's top_k_logits and top_p_logits keep (torch, as published), Sharpen draws from, and the
    probability it reports is the drawn token's under the softmax of what is kept: on a row with a tie at
    the k-th logit, and on a wide flat row whose top-p set reaches past the first candidates looked at."""
    ties = np.log(np.array([[0.4, 0.2, 0.2, 0.1, 0.05, 0.05], [0.5, 0.3, 0.1, 0.05, 0.03, 0.02]]))
    wide = np.random.default_rng(0).normal(0, 0.3, (2, 3000))
    for logits, top_k, top_p in ((ties, 2, 1.0), (ties, 0, 0.45), (ties, 0, 0.65), (wide, 0, 0.9), (wide, 2000, 0.8)):
        kept = sdar_filtered(logits, top_k, top_p)
        assert 0 < np.isfinite(kept).sum() < kept.size
        expected = torch.from_numpy(kept).softmax(-1).numpy()
        for seed in range(20):
            rng = np.random.default_rng(seed)
            tokens, probabilities = authors_proposals(logits, temperature=1.0, top_k=top_k, top_p=top_p, rng=rng)
            assert np.isfinite(kept[[0, 1], tokens]).all()
            assert probabilities == pytest.approx(expected[[0, 1], tokens])


def sdar_filtered(logits: np.ndarray, top_k: int, top_p: float) -> np.ndarray:
    tensor = torch.from_numpy(logits)
    if top_k > 0:
        kth = torch.topk(tensor, top_k).values[..., -1, None]
        tensor = torch.where(tensor < kth, torch.full_like(tensor, float("-inf")), tensor)
    if top_p < 1.0:
        ordered, indices = torch.sort(tensor, descending=True)
        remove = torch.cumsum(ordered.softmax(-1), -1) > top_p
        remove[..., 1:] = remove[..., :-1].clone()
        remove[..., 0] = False
        tensor = tensor.masked_fill(torch.zeros_like(remove).scatter(-1, indices, remove), float("-inf"))
    return tensor.numpy()


def test_the_sampler_options_are_checked() -> None:
    with pytest.raises(InvalidRequestError, match="sampler must be one of sharpen, sdar, fast_dllm_v2"):
        DiffusionSettings(sampler="llada").checked(8)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="sampler sdar decodes block by block"):
        DiffusionSettings(sampler="sdar", schedule="timestep").checked(8)
    with pytest.raises(InvalidRequestError, match="sub_block must be at least 1"):
        DiffusionSettings(sampler="fast_dllm_v2", sub_block=0).checked(8)
    DiffusionSettings(sampler="fast_dllm_v2", steps=1, block_length=2).checked(64)  # its steps are not counted
