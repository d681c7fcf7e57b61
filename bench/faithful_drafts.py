"""Drafts into a document, scored on what the user asked (issue #51).

The cases (bench/data/faithful_cases.toml, written by hand and frozen: bench/faithful_cases.py) are
documents with the cursor at the end or in the middle, each with an instruction as typed in the Ctrl+D box,
the length asked, the facts the draft must state, the stance it must keep (decline, accept, apologise) and
the people the document names. Each case is drafted, interleaved, by
- `diffusion` and `ar`: each engine forced through the service of a fresh install (its default settings,
  as bench/drafter_vs_ar.py forces them);
- `route`: another fresh install that routes the draft as a new user's would (it measures the machine on
  its first draft and learns only from its own drafts); the engine it chose is reported.
One llama.cpp job at a time: run it on an idle machine. Scores (bench/faithful_scores.py): the share of the
asked facts kept, stances kept (and flipped), drafts with a placeholder where the document names the people,
drafts that copy back the prompt's framing or 8 words in a row of the document or the instruction, the
share of repeated word 3-grams, tokens written against asked, and seconds a draft. All the cases, the
held-out kinds (no training data comes from them) and the others, apart.

    flock /tmp/sharpen-cpu.lock .venv/bin/python bench/faithful_drafts.py [--cases 8] [--ids a,b]
        [--engines diffusion,ar,route] [--set KEY=VALUE ...] [--json bench/out/faithful.json]

Proved to run with `--cases 8 --json bench/out/faithful-8.json` (8 cases spread over the groups: about 40 s
on a 2-core Xeon); from a git worktree, put `PYTHONPATH=.` before it so its own packages are imported.
`--json` writes every draft with its scores, so a person can read them.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from drafter_vs_ar import fresh_install
from embedded_quality import repeated_trigrams
from faithful_cases import CASES, FROZEN_SHA256, Case, load_cases, spread
from faithful_scores import (
    StanceVerdict,
    copied_back,
    facts_kept,
    length_ratio,
    placeholders,
    stance_kept,
)
from machine import describe_machine

from app.domain.draft_request import DraftRequest
from app.service import SharpenService
from router.request import EngineName

ROOT = Path(__file__).resolve().parents[1]
# The engines forced, and the route a fresh install takes.
LABELS = ("diffusion", "ar", "route")
FORCED: dict[str, EngineName] = {"diffusion": "diffusion", "ar": "ar"}


@dataclass(frozen=True)
class Scored:
    """One draft of one case, with its scores."""

    case: Case
    label: str
    engine: EngineName
    text: str
    facts: tuple[bool, ...]
    stance: StanceVerdict | None
    placeholders: tuple[str, ...]
    copied: str | None
    repeats: float
    tokens: int
    seconds: float
    reason: str
    # The drafts the AR drafter made before it kept this one (chat.fact_tries; 1 where it was not checked).
    tries: int = 1

    @property
    def placeholder_defect(self) -> bool:
        """A placeholder where the document names the people."""
        return bool(self.placeholders) and bool(self.case.names)

    def as_json(self) -> dict[str, Any]:
        case = self.case
        return {
            "case": case.id,
            "kind": case.kind,
            "held_out": case.held_out,
            "cursor": case.cursor,
            "label": self.label,
            "engine": self.engine,
            "route": self.reason,
            "instruction": case.instruction,
            "text": self.text,
            "facts": [
                {"alternatives": list(alternatives), "kept": kept}
                for alternatives, kept in zip(case.facts, self.facts, strict=True)
            ],
            "stance": case.stance,
            "stance_kept": self.stance.verdict if self.stance else None,
            "stance_phrases": {"keeping": self.stance.keeping, "flipping": self.stance.flipping}
            if self.stance
            else None,
            "placeholders": list(self.placeholders),
            "placeholder_defect": self.placeholder_defect,
            "copied_back": self.copied,
            "repeated_3grams": round(self.repeats, 4),
            "tokens_written": self.tokens,
            "tokens_asked": case.tokens,
            "length_ratio": round(length_ratio(self.tokens, case.tokens), 3),
            "seconds": round(self.seconds, 3),
            "tries": self.tries,
        }


def scored(
    case: Case, label: str, engine: EngineName, text: str, tokens: int, seconds: float, reason: str, tries: int = 1
) -> Scored:
    return Scored(
        case=case,
        label=label,
        engine=engine,
        text=text,
        facts=tuple(facts_kept(text, case.facts)),
        stance=stance_kept(text, case.stance, case.keeps, case.flips),
        placeholders=tuple(placeholders(text)),
        copied=copied_back(text, case.before, case.after, case.instruction),
        repeats=repeated_trigrams(text),
        tokens=tokens,
        seconds=seconds,
        reason=reason,
        tries=tries,
    )


def drafted(service: SharpenService, case: Case, label: str) -> Scored:
    """`case` drafted on `service`: the engine `label` names forced, or routed (`route`)."""
    request = DraftRequest(
        "draft", case.instruction, before=case.before, after=case.after, tokens=case.tokens, engine=FORCED.get(label)
    )
    reply = service.draft(request)
    text = reply.text()
    assert reply.done is not None
    stats = reply.done.stats
    tries = reply.checked.tries if reply.checked is not None else 1
    # An AR draft's text counted whole: a draft carried on, or led by an opener, generated only part of it.
    written = service.engines.writer().count_tokens(text) if reply.engine == "ar" and text else stats.generated_tokens
    return scored(case, label, reply.engine, text, written, stats.total_s, reply.route.reason, tries)


def summary_row(drafts: Sequence[Scored]) -> dict[str, Any]:
    """One row of the report: the drafts' scores pooled (facts over all facts asked)."""
    stances = [d.stance for d in drafts if d.stance is not None]
    facts = [kept for d in drafts for kept in d.facts]
    return {
        "drafts": len(drafts),
        "facts_kept": sum(facts) / len(facts) if facts else 0.0,
        "facts": f"{sum(facts)} of {len(facts)}",
        "stances_kept": sum(s.verdict == "kept" for s in stances),
        "stances_flipped": sum(s.verdict == "flipped" for s in stances),
        "stances": len(stances),
        "placeholders": sum(d.placeholder_defect for d in drafts),
        "copied_back": sum(d.copied is not None for d in drafts),
        "repeats": statistics.mean(d.repeats for d in drafts),
        "length_ratio": statistics.median(length_ratio(d.tokens, d.case.tokens) for d in drafts),
        "seconds": statistics.median(d.seconds for d in drafts),
        "tries": statistics.mean(d.tries for d in drafts),
        "engines": dict(Counter(d.engine for d in drafts)),
    }


GROUPS: tuple[tuple[str, Callable[[Case], bool]], ...] = (
    ("all", lambda case: True),
    ("held out", lambda case: case.held_out),
    ("not held out", lambda case: not case.held_out),
)


def report(results: Sequence[Scored], labels: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """For each group of cases and each label, the summary row (groups without drafts left out)."""
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for group, member in GROUPS:
        for label in labels:
            drafts = [d for d in results if d.label == label and member(d.case)]
            if drafts:
                rows.setdefault(group, {})[label] = summary_row(drafts)
    return rows


def print_report(rows: dict[str, dict[str, dict[str, Any]]]) -> None:
    print(
        "| cases | engine | drafts | facts kept | stances kept | flipped | placeholders | copied back "
        "| repeated 3-grams | written/asked (median) | median s | tries (mean) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for group, by_label in rows.items():
        for label, row in by_label.items():
            name = label
            if label == "route":
                name = "default route (" + ", ".join(f"{e} {n}" for e, n in sorted(row["engines"].items())) + ")"
            print(
                f"| {group} | {name} | {row['drafts']} | {row['facts_kept']:.0%} ({row['facts']}) | "
                f"{row['stances_kept']} of {row['stances']} | {row['stances_flipped']} | {row['placeholders']} | "
                f"{row['copied_back']} | {row['repeats']:.0%} | {row['length_ratio']:.2f} | {row['seconds']:.2f} | "
                f"{row['tries']:.2f} |"
            )


def commit() -> str:
    """The git commit the bench ran at, marked where the work tree differs from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        status = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head.stdout.strip() + (" with uncommitted changes" if status.stdout.strip() else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=None, help="this many cases, spread over the groups")
    parser.add_argument("--ids", default="", help="only these cases (comma-separated ids)")
    parser.add_argument("--engines", default=",".join(LABELS), help=f"a comma-separated subset of {','.join(LABELS)}")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting changed")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="write every draft and its scores")
    args = parser.parse_args()
    labels = [label.strip() for label in args.engines.split(",") if label.strip()]
    if not labels or set(labels) - set(LABELS):
        parser.error(f"--engines takes {', '.join(LABELS)}")
    try:
        case_set = load_cases()
    except ValueError as error:
        parser.error(f"{CASES}: {error}")
    cases = list(case_set.cases)
    if args.ids:
        wanted = [i.strip() for i in args.ids.split(",") if i.strip()]
        unknown = set(wanted) - {case.id for case in cases}
        if unknown:
            parser.error(f"unknown case ids: {', '.join(sorted(unknown))}")
        cases = [case for case in cases if case.id in wanted]
    if args.cases is not None:
        if args.cases < 1:
            parser.error("--cases must be at least 1")
        cases = spread(tuple(cases), args.cases)

    frozen = "the frozen set" if case_set.sha256 == FROZEN_SHA256 else f"CHANGED from the frozen {FROZEN_SHA256}"
    command = shlex.join(["python", *sys.argv])
    header = {
        "machine": describe_machine(),
        "command": command,
        "commit": commit(),
        "cases_file": str(CASES.relative_to(ROOT)),
        "cases_sha256": case_set.sha256,
        "frozen": case_set.sha256 == FROZEN_SHA256,
        "settings": args.set,
        "engines": labels,
    }
    print(f"machine: {header['machine']}")
    print(f"command: {command}")
    print(f"commit: {header['commit']}")
    print(f"cases: {header['cases_file']} sha256 {case_set.sha256} ({frozen})")
    held = sum(case.held_out for case in cases)
    print(f"{len(cases)} cases ({held} of held-out kinds), engines {', '.join(labels)}; settings changed: {args.set}")

    forced = fresh_install(args.set)  # both engines forced, as drafter_vs_ar.py forces them
    routed = fresh_install(args.set) if "route" in labels else None  # learns from its own drafts only
    print(f"models: AR {forced.config.models.complete}, diffusion {forced.config.models.draft}")
    results: list[Scored] = []
    for case in cases:
        for label in labels:  # interleaved: the machine's noise falls on all alike
            service = routed if label == "route" else forced
            assert service is not None
            result = drafted(service, case, label)
            results.append(result)
            stance = result.stance.verdict if result.stance else "-"
            print(
                f"  {case.id} [{label}: {result.engine}] facts {sum(result.facts)}/{len(result.facts)}, "
                f"stance {stance}, {result.tokens} tokens in {result.seconds:.1f} s, {result.tries} tries",
                file=sys.stderr,
                flush=True,
            )

    rows = report(results, labels)
    print()
    print_report(rows)
    first_route = next((r for r in results if r.label == "route"), None)
    if first_route is not None:
        print(f"\nthe default route's first choice: {first_route.engine} ({first_route.reason})")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {**header, "summary": rows, "drafts": [r.as_json() for r in results]}
        args.json.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"drafts written to {args.json}")


if __name__ == "__main__":
    main()
