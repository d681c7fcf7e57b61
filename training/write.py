"""`python -m training.write`: the writing adapter, a LoRA that teaches SmolLM2-135M-Instruct, as an AR model,
to write what a draft into a document asks (facts kept once, stances kept, names from the document, nothing of
the prompt echoed), laid out exactly as the AR drafter lays such drafts out (app/domain/context.py's
continued_reply: the request in the user's turn, the document up to the cursor as the start of the reply).

It learns from three sources, mixed: the writing cases (training/writing_cases.py's kinds and
training/writing_clauses.py's lists of things to say, composed by the project's own code from pools) and
the open instruction -> draft pairs the shipped drafter learned from (SmolLM2's own cleaned drafts), so
that replies to open prompts stay as they were; and short conversations that recall what the user said
(training/chat_turns.py), so that chat replies keep what was said earlier. Next-token loss on what the model is to
write (the held-back white space, the text, end-of-turn), causal attention, bf16 autocast where the CPU has
AMX. It checkpoints as it goes and resumes (--resume); the adapter is a llama.cpp LoRA GGUF of the base.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m training.write --out training/out-write --minutes 20 --bf16
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn import functional as F

from app.domain.context import continued_reply
from engines.messages import Instruction
from models.adapted import write_adapter
from models.transformer import DiffusionTransformer
from training.adapt.checkpoint import Progress, read_checkpoint, write_checkpoint
from training.adapt.lora import LoRALinear, add_lora, base_model
from training.chat_probes import mentions_probe
from training.chat_turns import ChatTurns, chat_turns
from training.data import Pair, distinct_instructions, load_pairs
from training.loop import cosine_rate, count_to_str, descend, spent
from training.writing_cases import WritingCase, writing_cases
from training.writing_clauses import clause_cases

ADAPTER_NAME = "sharpen-write-lora.gguf"
OPEN_DATA = (Path("training/data/drafts-open.jsonl"), Path("training/data/drafts-open-seed1.jsonl"))
HELD_CASES = 48  # writing cases of another seed, evaluated every `eval_every` steps


@dataclass(frozen=True)
class WritePlan:
    out: Path
    base: Path
    cases: int = 6000  # of training/writing_cases.py's kinds
    clauses: int = 6000  # and of training/writing_clauses.py's lists of things to say
    open_share: float = 0.3  # of the rows trained on, this share are open pairs
    open_data: tuple[Path, ...] = OPEN_DATA
    chats: int = 4000  # conversations of training/chat_turns.py
    chat_share: float = 0.1  # of the rows trained on, this share are conversations (taken from the cases' share)
    minutes: float = 20.0
    max_steps: int | None = None
    rank: int = 16
    alpha: float = 32.0
    batch: int = 8
    peak_lr: float = 5e-4
    warmup: int = 20
    eval_every: int = 40
    max_answer: int = 200
    bf16: bool = False
    resume: bool = False
    seed: int = 0


@dataclass(frozen=True)
class Row:
    prompt: list[int]  # not learned: the template, the request and the reply's start
    answer: list[int]  # learned: what the model writes, then end-of-turn


class Encoder:
    """The base's chat template and tokenizer, as the llama.cpp AR engine renders a chat call with a reply
    start (engines/llama_ar.py: the template's tokens, then the reply start tokenized on its own)."""

    def __init__(self, base: Path, max_answer: int) -> None:
        import llama_cpp

        from engines.chat_template import render_instruction
        from models.gguf_info import inspect_gguf

        info = inspect_gguf(base)
        self._vocab = llama_cpp.Llama(model_path=str(base), vocab_only=True, verbose=False)
        text_of = self._vocab._model.token_get_text
        self.eos = info.eos_token_id if info.eos_token_id is not None else 0
        self._render = lambda request: render_instruction(
            info.chat_template or "", request, bos_text=text_of(info.bos_token_id or 0), eos_text=text_of(self.eos)
        )
        self.max_answer = max_answer

    def row(self, request: Instruction, reply_start: str, answer: str) -> Row:
        rendered = self._render(request)
        prompt = self._vocab.tokenize(rendered.text.encode(), add_bos=not rendered.has_bos, special=True)
        if reply_start:
            prompt += self._vocab.tokenize(reply_start.encode(), add_bos=False, special=False)
        written = self._vocab.tokenize(answer.encode(), add_bos=False, special=False)[: self.max_answer - 1]
        return Row(prompt, [*written, self.eos])

    def case(self, case: WritingCase) -> Row:
        laid_out = continued_reply(case.instruction, case.before, case.after)
        return self.row(laid_out.request, laid_out.reply_start, laid_out.held_back + case.target)

    def pair(self, pair: Pair) -> Row:
        return self.row(pair.instruction, "", pair.draft)

    def chat(self, turns: ChatTurns) -> Row:
        """The conversation before the last reply, as the engine renders a chat call; the reply is learned."""
        return self.row(turns.prompt, "", turns.reply)


def collate(rows: list[Row], eos: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens (batch, n), and which positions are learned (predicted from the row before them)."""
    length = max(len(r.prompt) + len(r.answer) for r in rows)
    tokens = torch.full((len(rows), length), eos, dtype=torch.long)
    learned = torch.zeros((len(rows), length), dtype=torch.bool)
    for i, row in enumerate(rows):
        sequence = row.prompt + row.answer
        tokens[i, : len(sequence)] = torch.tensor(sequence)
        learned[i, len(row.prompt) : len(sequence)] = True
    return tokens, learned


def next_token_loss(model: DiffusionTransformer, tokens: torch.Tensor, learned: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the learned tokens, each predicted from the rows before it under causal attention
    (logits only for the rows that predict a learned token: the vocabulary is 49152 wide)."""
    length = tokens.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    hidden, _ = model(tokens, torch.arange(length), mask=causal)
    rows, positions = learned[:, 1:].nonzero(as_tuple=True)
    logits = model.logits(hidden[rows, positions])
    return F.cross_entropy(logits.float(), tokens[rows, positions + 1])


@torch.no_grad()
def held_loss(model: DiffusionTransformer, held: list[Row], eos: int, batch: int) -> float:
    losses = [next_token_loss(model, *collate(held[i : i + batch], eos)).item() for i in range(0, len(held), batch)]
    return sum(losses) / len(losses)


def save(plan: WritePlan, wrapped: dict[str, LoRALinear], progress: Progress, optimizer: torch.optim.Optimizer) -> Path:
    """The adapter GGUF, the log, and a checkpoint to resume from."""
    lora = write_checkpoint(plan.out, wrapped, progress, optimizer)
    return write_adapter(
        plan.out / ADAPTER_NAME, plan.base, lora, alpha=plan.alpha, name="sharpen-write-lora", diffusion=False
    )


def run(plan: WritePlan, log: Callable[[str], object] = print) -> Path:
    torch.manual_seed(plan.seed)
    rng = random.Random(plan.seed)
    encoder = Encoder(plan.base, plan.max_answer)
    made = writing_cases(plan.cases, seed=plan.seed) + clause_cases(plan.clauses, seed=plan.seed)
    cases = [encoder.case(case) for case in made]
    held_made = writing_cases(HELD_CASES // 2, seed=plan.seed + 1000) + clause_cases(HELD_CASES // 2, plan.seed + 1000)
    held = [encoder.case(case) for case in held_made]
    pairs = distinct_instructions([pair for path in plan.open_data for pair in load_pairs(path)])
    open_rows = [encoder.pair(pair) for pair in pairs]
    chat_rows = [encoder.chat(turns) for turns in chat_turns(plan.chats, plan.seed, pairs, held_out=mentions_probe)]
    model = base_model(plan.base)
    wrapped = add_lora(model, plan.rank, plan.alpha)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=plan.peak_lr, betas=(0.9, 0.99), weight_decay=0.0)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=plan.bf16)
    plan.out.mkdir(parents=True, exist_ok=True)
    log(
        f"{len(cases)} writing cases, {len(open_rows)} open pairs ({plan.open_share:.0%} of each batch), "
        f"{len(chat_rows)} conversations ({plan.chat_share:.0%}), "
        f"{len(held)} held-out cases; LoRA rank {plan.rank}: {count_to_str(sum(p.numel() for p in trainable))} "
        "trainable parameters"
    )
    progress = Progress()
    if plan.resume:
        progress = Progress(**read_checkpoint(plan.out, wrapped, optimizer)["progress"])
        if progress.step and progress.minutes:
            progress.planned = max(progress.step + 1, int(plan.minutes * progress.step / progress.minutes))
        log(f"resumed at step {progress.step} ({progress.minutes:.1f} min trained)")
    else:
        with autocast:
            before = held_loss(model, held, encoder.eos, plan.batch)
        log(f"before training: held-out cases {before:.3f}")
        progress.rows.append(
            {"step": 0, "tokens_seen": 0, "train_loss": float("nan"), "heldout_loss": before, "minutes": 0.0}
        )
    started = time.perf_counter() - progress.minutes * 60
    open_per_batch = round(plan.batch * plan.open_share)
    chats_per_batch = round(plan.batch * plan.chat_share) if chat_rows else 0
    cases_per_batch = plan.batch - open_per_batch - chats_per_batch
    while not spent(plan, progress.step, time.perf_counter() - started):
        if progress.step == 10 and not progress.planned:
            per_step = (time.perf_counter() - started) / 10
            progress.planned = max(20, int(plan.minutes * 60 / per_step))
        batch = (
            rng.sample(cases, cases_per_batch)
            + rng.sample(open_rows, open_per_batch)
            + rng.sample(chat_rows, chats_per_batch)
        )
        tokens, learned = collate(batch, encoder.eos)
        with autocast:
            loss = next_token_loss(model, tokens, learned)
        descend(
            optimizer,
            loss,
            trainable,
            cosine_rate(progress.step, progress.planned or 100_000, plan.peak_lr, plan.warmup),
        )
        progress.step += 1
        progress.tokens_seen += tokens.numel()
        last = progress.train_loss
        progress.train_loss = loss.item() if last != last else 0.95 * last + 0.05 * loss.item()
        if progress.step % plan.eval_every == 0:
            evaluated(plan, model, held, encoder.eos, progress, started, autocast, log)
            save(plan, wrapped, progress, optimizer)
    if progress.rows[-1]["step"] != progress.step:
        evaluated(plan, model, held, encoder.eos, progress, started, autocast, log)
    return save(plan, wrapped, progress, optimizer)


def evaluated(
    plan: WritePlan,
    model: DiffusionTransformer,
    held: list[Row],
    eos: int,
    progress: Progress,
    started: float,
    autocast: torch.autocast,
    log: Callable[[str], object],
) -> None:
    with autocast:
        heldout = held_loss(model, held, eos, plan.batch)
    progress.minutes = (time.perf_counter() - started) / 60
    progress.rows.append(
        {
            "step": progress.step,
            "tokens_seen": progress.tokens_seen,
            "train_loss": progress.train_loss,
            "heldout_loss": heldout,
            "minutes": progress.minutes,
        }
    )
    log(
        f"step {progress.step:5d}  {progress.minutes:5.1f} min  tokens {count_to_str(progress.tokens_seen):>6}"
        f"  train {progress.train_loss:.3f}  held-out cases {heldout:.3f}"
    )


def main() -> None:
    from models.catalogue import builtin_catalogue, embedded_file

    parser = argparse.ArgumentParser(description="Train the writing adapter for SmolLM2-135M-Instruct (LoRA)")
    parser.add_argument("--out", type=Path, default=Path("training/out-write"))
    parser.add_argument("--base", type=Path, default=None, help="the base GGUF (default: the embedded AR model)")
    parser.add_argument("--cases", type=int, default=WritePlan.cases)
    parser.add_argument("--clauses", type=int, default=WritePlan.clauses)
    parser.add_argument("--open-share", type=float, default=WritePlan.open_share)
    parser.add_argument("--chats", type=int, default=WritePlan.chats)
    parser.add_argument("--chat-share", type=float, default=WritePlan.chat_share)
    parser.add_argument("--minutes", type=float, default=WritePlan.minutes)
    parser.add_argument("--steps", type=int, default=None, help="stop after this many steps (tests)")
    parser.add_argument("--rank", type=int, default=WritePlan.rank)
    parser.add_argument("--peak-lr", type=float, default=WritePlan.peak_lr)
    parser.add_argument("--batch", type=int, default=WritePlan.batch)
    parser.add_argument("--eval-every", type=int, default=WritePlan.eval_every)
    parser.add_argument("--bf16", action="store_true", help="bfloat16 autocast (faster with AMX or AVX512_BF16)")
    parser.add_argument("--resume", action="store_true", help="go on from the checkpoint in --out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    base = args.base or embedded_file(builtin_catalogue()["smollm2-135m-instruct"].source)
    plan = WritePlan(
        out=args.out,
        base=base,
        cases=args.cases,
        clauses=args.clauses,
        open_share=args.open_share,
        chats=args.chats,
        chat_share=args.chat_share,
        minutes=args.minutes,
        max_steps=args.steps,
        rank=args.rank,
        peak_lr=args.peak_lr,
        batch=args.batch,
        eval_every=args.eval_every,
        bf16=args.bf16,
        resume=args.resume,
        seed=args.seed,
    )
    print(f"wrote {run(plan)}")


if __name__ == "__main__":
    main()
