"""A training run carried to a GPU machine and its adapter carried back, within what one device call carries.

A call sends the working tree and at most 64 MiB in all (the tracked tree alone is about 46 MiB), and the base
GGUF is 98 MB; a file that comes back may be 16 MiB, and an adapter is 19.6 MB. So a file travels in parts
with a manifest (its size and sha256, each part's too): the base one part a call, each stashed on the machine
(its disk stays while the machine is held between calls) until all are there, and the adapter back in two.
Every call also brings the trip (which files each call brings, with their sha256), so a machine that went back
between calls names the calls to carry again. A file is joined only when every call's files are there and it
matches its sha256. The standard library and this checkout only: it runs on the GPU machine before anything is
installed there.

    here:   .venv/bin/python -m training.gpu_payload prepare --base BASE.gguf --file examples.pt ...
    there:  python3 -m training.gpu_payload stash .device-train --into /var/tmp/sharpen-payload
    there:  python3 -m training.gpu_payload pick RUN_DIR... --out "$OUT"
    here:   .venv/bin/python -m training.gpu_payload join FILES_AT/NAME.manifest.json --out NAME
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from models.hub import sha256_of
from training.selection import BEST_ADAPTER_NAME, adapter_rank

MiB = 1 << 20
CALL_BYTES = 64 * MiB  # what one device call carries: the working tree and the carried paths together
RETURN_FILE_BYTES = 16 * MiB  # the largest file that comes back from a call
RETURN_FILES, RETURN_BYTES = 8, 64 * MiB  # and how many, how much in all
MARGIN = MiB  # for what the tree gains between preparing and calling (a log, a note)
MANIFEST = ".manifest.json"
TRIP = "trip.json"  # which files each call brings, with their sha256


class MissingParts(Exception):
    def __init__(self, name: str, missing: list[str], total: int) -> None:
        numbers = ", ".join(part.rsplit("-", 1)[-1] for part in missing)
        super().__init__(f"{name}: {len(missing)} of its {total} parts not here yet ({numbers})")
        self.missing = missing


def split(path: Path, out_dir: Path, part_bytes: int, first_part_bytes: int | None = None) -> Path:
    """Write PATH's parts (NAME.part-01, ...) and its manifest (NAME.manifest.json) into OUT_DIR; the manifest."""
    out_dir.mkdir(parents=True, exist_ok=True)
    parts: list[dict[str, object]] = []
    with path.open("rb") as handle:
        size = part_bytes if first_part_bytes is None else first_part_bytes
        while chunk := handle.read(size):
            part = out_dir / f"{path.name}.part-{len(parts) + 1:02d}"
            part.write_bytes(chunk)
            parts.append({"file": part.name, "bytes": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()})
            size = part_bytes
    manifest = out_dir / f"{path.name}{MANIFEST}"
    record = {"name": path.name, "bytes": path.stat().st_size, "sha256": sha256_of(path), "parts": parts}
    manifest.write_text(json.dumps(record, indent=1))
    return manifest


def join(manifest: Path, out: Path) -> Path:
    """The file MANIFEST describes, from the parts beside it, checked part by part and whole."""
    record = json.loads(manifest.read_text())
    here = manifest.parent
    missing = [p["file"] for p in record["parts"] if not _part_ok(here / p["file"], p)]
    if missing:
        raise MissingParts(record["name"], missing, len(record["parts"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with partial.open("wb") as handle:
        for part in record["parts"]:
            with (here / part["file"]).open("rb") as source:
                shutil.copyfileobj(source, handle)
    if sha256_of(partial) != record["sha256"]:
        partial.unlink()
        raise ValueError(f"{record['name']}: the joined parts do not match its sha256")
    partial.replace(out)
    return out


def _part_ok(path: Path, part: dict[str, object]) -> bool:
    return path.is_file() and path.stat().st_size == part["bytes"] and sha256_of(path) == part["sha256"]


def stash(carried: Path, into: Path) -> None:
    """Copy every file under CARRIED (what this call brought) into INTO, flat, over any copy already there."""
    into.mkdir(parents=True, exist_ok=True)
    for path in sorted(p for p in carried.rglob("*") if p.is_file()) if carried.is_dir() else []:
        shutil.copyfile(path, into / path.name)


def still_to_carry(into: Path) -> list[str]:
    """The call folders (by the trip every call brings) whose files are not all in INTO, whole."""
    if not (into / TRIP).is_file():
        raise ValueError(f"no trip here: carry one of the call folders that `prepare` laid out (none has {TRIP})")
    calls: dict[str, dict[str, str]] = json.loads((into / TRIP).read_text())["calls"]
    return [
        call
        for call, files in calls.items()
        if not all((into / name).is_file() and sha256_of(into / name) == sha for name, sha in files.items())
    ]


def arrive(carried: Path, into: Path) -> tuple[list[str], bool]:
    """Keep what this call brought; once every call's files are there, join the files that travelled in parts.
    Lines saying where the trip stands, and whether it is complete."""
    stash(carried, into)
    missing = still_to_carry(into)
    if missing:
        return [f"still to carry, one call each: {', '.join(missing)}"], False
    lines = []
    for manifest in sorted(into.glob(f"*{MANIFEST}")):
        record = json.loads(manifest.read_text())
        target = into / record["name"]
        if target.is_file() and sha256_of(target) == record["sha256"]:
            lines.append(f"{record['name']}: here")
        else:
            join(manifest, target)
            lines.append(f"{record['name']}: joined from {len(record['parts'])} parts")
    return lines, True


def travelling_bytes(repo: Path) -> int:
    """What a device call sends without any carried path: tracked files and untracked ones git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    paths = {repo / name.decode() for name in listed.split(b"\0") if name}
    return sum(path.stat().st_size for path in paths if path.is_file())


def prepare(repo: Path, base: Path, files: list[Path], out: Path, call_bytes: int = CALL_BYTES) -> list[Path]:
    """Lay out OUT/call-01, call-02, ... (OUT ignored by git, so that only the call's own folder travels): each
    fits one call beside the tree; FILES go with the first, the base's parts fill the rest. The call folders."""
    out.mkdir(parents=True, exist_ok=True)  # a folder pattern ("/.device-train/") matches folders only
    ignored = subprocess.run(["git", "check-ignore", "-q", str(out.resolve())], cwd=repo, check=False)
    if ignored.returncode != 0:
        raise ValueError(
            f"{out} is not ignored by git, so every call would carry all of it: add it to .git/info/exclude"
        )
    shutil.rmtree(out)
    room = call_bytes - travelling_bytes(repo) - MARGIN
    extras = sum(path.stat().st_size for path in files)
    if room - extras < MiB:
        raise ValueError(f"no room in a call: the tree leaves {room / MiB:.1f} MiB, the files take {extras / MiB:.1f}")
    staging = out / "parts"
    beside = 64 << 10  # what every call also brings: the trip and the manifest, a few KB each
    manifest = split(base, staging, room - beside, first_part_bytes=room - extras - beside)
    record = json.loads(manifest.read_text())
    calls = []
    for number, part in enumerate(record["parts"], start=1):
        call = out / f"call-{number:02d}"
        call.mkdir(parents=True)
        (staging / part["file"]).rename(call / part["file"])
        calls.append(call)
    for path in files:
        shutil.copyfile(path, calls[0] / path.name)
    trip = {"calls": {call.name: {p.name: sha256_of(p) for p in sorted(call.iterdir())} for call in calls}}
    for call in calls:  # every call brings the trip and the manifest: a machine that went back says what it lacks
        (call / TRIP).write_text(json.dumps(trip, indent=1))
        shutil.copyfile(manifest, call / manifest.name)
    shutil.rmtree(staging)
    return calls


@dataclass(frozen=True)
class RunBest:
    run: Path
    step: int
    unseen_one_pass: float
    heldout_loss: float


def run_best(run: Path) -> RunBest | None:
    """A training run's best logged row, as training/adapt/run.py chooses it: the highest one-pass accuracy
    on the unseen pairs where logged, ties to the lowest held-out loss; None for a run that logged no
    evaluation after its start."""
    log = run / "training_log.csv"
    rows = [
        RunBest(run, int(r["step"]), float(r.get("unseen_one_pass_accuracy") or "nan"), float(r["heldout_loss"]))
        for r in (csv.DictReader(log.open()) if log.is_file() else [])
    ]
    trained = [row for row in rows if row.step > 0]
    return min(trained, key=_rank) if trained else None


def _rank(best: RunBest) -> tuple[float, float]:
    return adapter_rank(best.unseen_one_pass, best.heldout_loss)


def pick(runs: list[Path], out: Path) -> list[str]:
    """Into OUT, what comes back from the GPU machine: every run's log (NAME.csv), and the best run's best
    adapter in parts with its manifest; lines saying which run won and why."""
    out.mkdir(parents=True, exist_ok=True)
    lines, bests = [], []
    for run in runs:
        if (run / "training_log.csv").is_file():
            shutil.copyfile(run / "training_log.csv", out / f"{run.name}.csv")
        best = run_best(run)
        if best is None or not (run / BEST_ADAPTER_NAME).is_file():
            lines.append(f"{run.name}: no adapter better than its start")
            continue
        bests.append(best)
        lines.append(
            f"{run.name}: best at step {best.step}, unseen one-pass {best.unseen_one_pass:.1%}, "
            f"held-out {best.heldout_loss:.3f}"
        )
    if bests:
        winner = min(bests, key=_rank)
        adapter_bytes = (winner.run / BEST_ADAPTER_NAME).stat().st_size
        files = len(runs) + 2 + math.ceil(adapter_bytes / (RETURN_FILE_BYTES - MiB))  # + summary and manifest
        if files > RETURN_FILES or adapter_bytes > RETURN_BYTES - MiB:
            raise ValueError(
                f"{winner.run.name}'s adapter ({adapter_bytes / MiB:.1f} MiB) and the logs would come back as {files} "
                f"files: a call brings back at most {RETURN_FILES}, {RETURN_BYTES // MiB} MiB in all"
            )
        split(winner.run / BEST_ADAPTER_NAME, out, RETURN_FILE_BYTES - MiB)
        lines.append(f"brought back: {winner.run.name}'s {BEST_ADAPTER_NAME}")
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    prepare_verb = verbs.add_parser("prepare", help="here: lay out the calls (OUT/call-01, ...)")
    prepare_verb.add_argument("--base", type=Path, required=True)
    prepare_verb.add_argument("--file", type=Path, action="append", default=[], help="goes with the first call")
    prepare_verb.add_argument("--out", type=Path, default=Path(".device-train"))
    stash_verb = verbs.add_parser("stash", help="there: keep what this call carried; when all is here, join it")
    stash_verb.add_argument("carried", type=Path)
    stash_verb.add_argument("--into", type=Path, required=True)
    pick_verb = verbs.add_parser("pick", help="there: every run's log and the best run's adapter, in parts")
    pick_verb.add_argument("runs", type=Path, nargs="+")
    pick_verb.add_argument("--out", type=Path, required=True)
    join_verb = verbs.add_parser("join", help="here: a file from the parts a call brought back")
    join_verb.add_argument("manifest", type=Path)
    join_verb.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    try:
        if args.verb == "prepare":
            calls = prepare(Path.cwd(), args.base, args.file, args.out)
            for call in calls:
                size = sum(p.stat().st_size for p in call.iterdir())
                print(f"{call}: {size / MiB:.1f} MiB ({', '.join(sorted(p.name for p in call.iterdir()))})")
        elif args.verb == "stash":
            lines, complete = arrive(args.carried, args.into)
            print("\n".join(lines))
            if not complete:
                sys.exit(3)
        elif args.verb == "pick":
            print("\n".join(pick(args.runs, args.out)))
        else:
            print(join(args.manifest, args.out))
    except (OSError, ValueError, MissingParts) as error:
        print(f"sharpen: error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
