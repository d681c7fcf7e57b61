"""The adapter training loop (the package's docstring says what it trains)."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from pathlib import Path

import torch

from training.adapt.checkpoint import Progress, keep_if_best, log_row, resume, save
from training.adapt.evaluation import EVAL_BATCH, evaluate, one_pass_accuracy
from training.adapt.examples import Example, batches, collate, encode_data, held_batches, read_examples
from training.adapt.lora import add_lora, base_model, load_adapter
from training.adapt.loss import shifted_loss
from training.adapt.plan import AdaptPlan
from training.block_loss import block_causal_loss
from training.loop import cosine_rate, count_to_str, descend, spent
from training.selection import adapter_rank


def run(plan: AdaptPlan, log: Callable[[str], object] = print) -> Path:
    torch.manual_seed(plan.seed)
    rng = random.Random(plan.seed)
    if plan.examples is not None:
        encoded = read_examples(plan.examples, plan.base)
    else:
        encoded = encode_data(plan.data, plan.base, plan.max_answer, plan.unseen, plan.writing_share, plan.seed)
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
        if spent(plan, progress.step, elapsed):
            break
        # The schedule is fitted to the budget from steps 2 to 12 of this run: the first steps pay for
        # start-up (a GPU's kernels and allocator), which would shorten it.
        if progress.step == first_step + 2:
            timed_from = elapsed
        if progress.step == first_step + 12 and not progress.planned:
            per_step = (elapsed - timed_from) / 10
            progress.planned = max(20, progress.step + int((budget_s - elapsed) / per_step))
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
        rate = cosine_rate(progress.step, progress.planned or 100_000, plan.peak_lr, plan.warmup)
        descend(optimizer, loss, trainable, rate)
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
