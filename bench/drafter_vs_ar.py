"""The default drafter against the AR model, each at the settings a fresh install uses, in one run.

Drafts: the unseen instructions (training/open_prompts.py, kinds and subjects never trained on) at
N = 128 and 256 tokens, each drafted by both engines through the service (the engine forced, everything
else as configured by default: the diffusion drafter's cache, K and rules, AR's loop controls), the two
interleaved. Per engine: tokens per second and the ratio, the share on topic, the share of word 3-grams
repeated, the drafts holding a run of empty or one-character lines (three in a row), the position of
the drafts' perplexity between SmolLM2's own greedy drafts of the same length (0) and their words
shuffled (1; bench/embedded_quality.py's measure, over the whole draft), and passes per token.
Rewrites: paragraphs holding names and numbers (bench/data/rewrite_paragraphs.txt, written for this
bench), each rewritten "more formal", "shorter" and "as a list" by both engines: how many of the
selection's names and numbers the rewrite keeps.
Estimates: the router's wait, for the length each engine's drafts are expected to write (learnt from the
drafts before it in the run, as a user's install learns: router/expected_lengths.py), against the median time, as
each draft's median error and as the mean estimate against the mean time; the estimate had the draft asked
for the length it wrote (the cost model's own error); and which engine the router's estimates for the
length asked call faster (what it compares), beside the one that wrote more tokens a second and the one
whose median draft took less time.
With --calibrate the fresh install is first measured as `sharpen calibrate` measures it (on its idle machine,
the profile says whether it was), and each length says which engine that calibration's estimates called
faster before any draft taught them.
One llama.cpp job at a time: run it on an idle machine.

    .venv/bin/python bench/drafter_vs_ar.py [--prompts 20] [--lengths 128,256] [--rewrites 6] [--calibrate]
        [--set models.draft=CANDIDATE.gguf --set diffusion.threshold=0.9 ...]
        [--candidate bf16:models.draft=bench/out/sharpen-draft-merged-bf16.gguf ...]

`--set` changes a setting of the fresh install (as `sharpen config set` would): to measure a candidate
drafter, or other decoding settings, against the same AR model. `--candidate LABEL:KEY=VALUE[;KEY=VALUE]`
adds another fresh install with those settings whose diffusion drafts are interleaved with the others (side
by side in one run: the machine's noise falls on all alike).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import llama_cpp
import training_path  # noqa: F401  (training/ importable)
from embedded_quality import position, prompts_of, repeated_trigrams, scored
from machine import describe_machine

from app.domain.draft_request import DraftRequest
from app.service import SharpenService
from app.storage.config import load_config, set_value
from app.storage.paths import SharpenPaths
from engines.events import DiffusionStats, GenerationStats
from engines.llama_ar import LlamaAREngine
from models.catalogue import resolve_model
from router.cost_measurement import CalibrationSizes
from router.request import EngineName
from training.open_prompts import on_topic

PARAGRAPHS = Path(__file__).resolve().parent / "data" / "rewrite_paragraphs.txt"
REWRITES = ("more formal", "shorter", "as a list")
ENGINES: tuple[EngineName, ...] = ("diffusion", "ar")
# A number: digits, with their separators; a name: a capitalised word that does not open a sentence.
NUMBER = re.compile(r"\d[\d,.:/]*\d|\d")
SENTENCE = re.compile(r"(?<=[.!?:])\s+|\n+")
# Lines in a row, empty or of one character, that make a run: a paragraph break is one empty line.
BLANK_RUN = 3


@dataclass
class Tally:
    seconds: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    passes: list[int] = field(default_factory=list)
    topical: list[bool] = field(default_factory=list)
    repeats: list[float] = field(default_factory=list)
    perplexity: list[float] = field(default_factory=list)
    kept: list[float] = field(default_factory=list)
    blank_runs: list[bool] = field(default_factory=list)  # drafts holding a run of empty or 1-character lines
    estimated: list[float] = field(default_factory=list)  # the router's estimate for the draft, in seconds
    # The router's estimate for the length asked: what it compares the engines by.
    compared: list[float] = field(default_factory=list)
    # The router's estimate had it known the length written (drafts end at end-of-text): the cost model's
    # own error, without the length's.
    estimated_written: list[float] = field(default_factory=list)

    @property
    def tokens_per_s(self) -> float:
        return sum(self.tokens) / sum(self.seconds) if self.seconds else 0.0


def facts(text: str) -> set[str]:
    """The names and numbers of a paragraph, as a rewrite should keep them."""
    names = {
        word.strip(",;:.!?()'\"")
        for sentence in SENTENCE.split(text)
        for word in sentence.split()[1:]
        if word[:1].isupper() and word[1:2].islower()
    }
    return names | set(NUMBER.findall(text))


def has_blank_run(text: str, lines: int = BLANK_RUN) -> bool:
    """Whether the draft holds `lines` lines in a row that are empty or one character ("[", "-")."""
    run = 0
    for line in text.splitlines():
        run = run + 1 if len(line.strip()) <= 1 else 0
        if run >= lines:
            return True
    return False


def run(service: SharpenService, request: DraftRequest, tally: Tally) -> str:
    reply = service.draft(request)
    text = reply.text()
    assert reply.done is not None and request.engine is not None
    stats = reply.done.stats
    tally.seconds.append(stats.total_s)
    tally.estimated.append(reply.route.estimates[request.engine].seconds)
    tally.compared.append(reply.route.estimates[request.engine].seconds_as_asked)
    tally.estimated_written.append(service.estimate_as_written(request, service.draft_settings.resolve(), reply))
    tally.tokens.append(stats.generated_tokens)
    if isinstance(stats, DiffusionStats):
        tally.passes.append(stats.passes)
    else:
        assert isinstance(stats, GenerationStats)
        tally.passes.append(stats.generated_tokens)
    return text


def fresh_install(changes: list[str]) -> SharpenService:
    """A service on a new, empty Sharpen home with `changes` (KEY=VALUE) made to its config."""
    paths = SharpenPaths.under(Path(tempfile.mkdtemp(prefix="sharpen-bench-")))
    for change in changes:
        key, _, value = change.partition("=")
        set_value(paths.config_file, key, value)
    return SharpenService(load_config(paths.config_file), paths)


def calibrated_picks(service: SharpenService, instruction: str, lengths: list[int]) -> dict[int, str]:
    """Measure the install as `sharpen calibrate` does; for each length, the engine its estimates call faster
    (for the length asked, as the router compares them) and both estimates."""
    profile = service.calibrations.calibrate(CalibrationSizes(), lambda _fraction, _label: None)
    load = profile.load
    state = "under load" if profile.measured_under_load else "idle"
    print(
        f"calibrated ({state}: other processes kept {load.others_before:.2f} and {load.others_during:.2f} cores busy)"
    )
    plan = service.draft_settings.plan(service.draft_settings.resolve())
    picks = {}
    for n in lengths:
        request = DraftRequest("draft", instruction, tokens=n, policy="fastest")
        route = service._draft_route(request, n, plan, as_asked=True)
        ar, diffusion = (route.estimates[engine].seconds_as_asked for engine in ("ar", "diffusion"))
        picks[n] = f"{route.engine} (AR {ar:.2f} s, diffusion {diffusion:.2f} s)"
    return picks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--lengths", default="128,256")
    parser.add_argument("--rewrites", type=int, default=6, help="paragraphs to rewrite (each three ways)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting changed")
    parser.add_argument(
        "--candidate", action="append", default=[], metavar="LABEL:KEY=VALUE[;KEY=VALUE]", help="another drafter"
    )
    parser.add_argument("--calibrate", action="store_true", help="measure the install as `sharpen calibrate` first")
    args = parser.parse_args()
    print(f"machine: {describe_machine()}")
    for change in args.set:
        print(f"set {change}")
    service = fresh_install(args.set)  # a fresh install's defaults
    print(f"models: AR {service.config.models.complete}, diffusion {service.config.models.draft}; defaults")
    runs: list[tuple[str, SharpenService, EngineName]] = [("diffusion", service, "diffusion"), ("ar", service, "ar")]
    for candidate in args.candidate:
        label, _, changes = candidate.partition(":")
        runs.append((label, fresh_install([*args.set, *changes.split(";")]), "diffusion"))
        print(f"candidate {label}: {changes}")
    labels = [label for label, _, _ in runs]
    scorer = llama_cpp.Llama(
        str(resolve_model("smollm2-135m-instruct").path), n_ctx=1024, n_batch=512, logits_all=True, verbose=False
    )
    ar = service.engines.ar()
    assert isinstance(ar, LlamaAREngine), "the embedded AR model scores the drafts"
    pairs = prompts_of("unseen", args.prompts)
    lengths = [int(n) for n in args.lengths.split(",")]
    calibrated = calibrated_picks(service, pairs[0][0], lengths) if args.calibrate else {}
    drafts = {(n, label): Tally() for n in lengths for label in labels}
    shuffled: dict[int, list[float]] = {n: [] for n in lengths}  # AR's drafts with their words shuffled
    rng = random.Random(0)
    for n in lengths:
        for instruction, topic_words in pairs:
            for label, runner, engine in runs:  # interleaved: the machine's noise falls on all alike
                tally = drafts[n, label]
                text = run(runner, DraftRequest("draft", instruction, tokens=n, engine=engine), tally)
                tally.topical.append(on_topic(text, topic_words))
                tally.repeats.append(repeated_trigrams(text))
                tally.blank_runs.append(has_blank_run(text))
                tally.perplexity.append(scored(scorer, ar, instruction, text, n)[0])
                if label == "ar":
                    words = text.split()
                    rng.shuffle(words)
                    shuffled[n].append(scored(scorer, ar, instruction, " ".join(words), n)[0])
    print(f"\n{len(pairs)} unseen instructions; position 0: AR's drafts at the same N, 1: their words shuffled")
    print(
        "| N | engine | tokens/s | x AR | on topic | repeated 3-grams | blank runs | position | passes per token "
        "| median s | router's estimate | at the length written |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in lengths:
        ar_rate = drafts[n, "ar"].tokens_per_s
        for label in labels:
            tally = drafts[n, label]
            reads = position(tally.perplexity, drafts[n, "ar"].perplexity, shuffled[n])
            measured, estimated = statistics.median(tally.seconds), statistics.median(tally.estimated)
            errors = [e / m - 1 for e, m in zip(tally.estimated_written, tally.seconds, strict=True)]
            route_errors = [e / m - 1 for e, m in zip(tally.estimated, tally.seconds, strict=True)]
            print(
                f"| {n} | {label} | {tally.tokens_per_s:.1f} | {tally.tokens_per_s / ar_rate:.2f} | "
                f"{sum(tally.topical)} of {len(tally.topical)} | {statistics.mean(tally.repeats):.0%} | "
                f"{sum(tally.blank_runs)} | {reads:.2f} | {sum(tally.passes) / max(1, sum(tally.tokens)):.2f} | "
                f"{measured:.2f} | "
                f"{estimated:.2f} ({estimated / measured - 1:+.0%}; median {statistics.median(route_errors):+.0%}; "
                f"of the mean {statistics.mean(tally.estimated) / statistics.mean(tally.seconds) - 1:+.0%}) | "
                f"median {statistics.median(errors):+.0%} |"
            )
        faster_estimated = min(ENGINES, key=lambda e: statistics.median(drafts[n, e].compared))
        faster_measured = max(ENGINES, key=lambda e: drafts[n, e].tokens_per_s)
        sooner = min(ENGINES, key=lambda e: statistics.median(drafts[n, e].seconds))
        print(
            f"| {n} | the router's estimates for {n} tokens pick {faster_estimated}; measured faster (tokens/s): "
            f"{faster_measured}; the shorter median wait: {sooner} |"
        )
        if n in calibrated:
            print(f"| {n} | before any draft, the calibration's estimates picked {calibrated[n]} |")
        plan = service.draft_settings.plan(service.draft_settings.resolve())
        chosen = service._draft_route(DraftRequest("draft", pairs[0][0], tokens=n), n, plan)
        print(f"| {n} | routed (not forced) to {chosen.engine}: {chosen.reason} |")

    if not args.rewrites:
        return
    paragraphs = [p.strip() for p in PARAGRAPHS.read_text(encoding="utf-8").split("===") if p.strip()]
    rewrites = {engine: Tally() for engine in ENGINES}
    for paragraph in paragraphs[: args.rewrites]:
        wanted = facts(paragraph)
        tokens = max(32, len(paragraph) // 4)
        for instruction in REWRITES:
            for engine in ENGINES:
                request = DraftRequest("infill", instruction, selection=paragraph, tokens=tokens, engine=engine)
                text = run(service, request, rewrites[engine])
                rewrites[engine].kept.append(len(wanted & facts(text)) / len(wanted) if wanted else 1.0)
    print(f"\n{min(args.rewrites, len(paragraphs))} paragraphs rewritten {', '.join(REWRITES)}: names and numbers kept")
    print("| engine | kept (mean) | rewrites keeping all | tokens/s |")
    print("|---|---|---|---|")
    for engine in ENGINES:
        tally = rewrites[engine]
        whole = sum(share == 1.0 for share in tally.kept)
        kept = statistics.mean(tally.kept)
        print(f"| {engine} | {kept:.0%} | {whole} of {len(tally.kept)} | {tally.tokens_per_s:.1f} |")


if __name__ == "__main__":
    main()
