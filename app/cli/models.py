"""`sharpen models` (list, pull, rm, info, use, convert) and `sharpen inspect`."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

from app.cli.common import Command, gb, service
from app.orchestration.model_manager import ROLES
from app.storage.config import set_value
from models.checkpoint_gguf import QUANTIZATIONS, write_checkpoint_gguf
from models.errors import ModelError
from models.found.stores import FoundModel
from models.gguf_info import inspect_gguf
from models.hf_checkpoint import inspect_checkpoint
from models.hub import PullProgress


def models_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true")
    actions = parser.add_subparsers(dest="action")
    listing = actions.add_parser("list", help="the models Sharpen knows, which are present, which fit")
    listing.add_argument("--json", action="store_true")
    pull = actions.add_parser("pull", help="download a model from the Hugging Face Hub into the HF cache")
    pull.add_argument("name")
    pull.add_argument("--offline", action="store_true", help="use only the local cache (as HF_HUB_OFFLINE=1)")
    pull.add_argument("--force", action="store_true", help="download even if it does not fit this machine")
    remove = actions.add_parser("rm", help="delete a downloaded model from the HF cache")
    remove.add_argument("name")
    info = actions.add_parser("info", help="everything about one model: source, size, needs, file details")
    info.add_argument("name")
    info.add_argument("--json", action="store_true")
    use = actions.add_parser("use", help="serve a role with a model (validated first)")
    use.add_argument(
        "name",
        help="an existing path, else a catalogue name, else a found model's name (Ollama's name:tag, LM Studio's "
        "publisher/repo, an HF repo owner/repo, or the full name `models list` shows)",
    )
    use.add_argument("--for", dest="role", required=True, choices=ROLES)
    use.add_argument("--force", action="store_true", help="use it even if it does not fit this machine")
    convert = actions.add_parser(
        "convert", help="write a block-causal checkpoint (SDAR, Fast-dLLM v2) as a GGUF that llama.cpp runs"
    )
    convert.add_argument("source", help="a checkpoint folder, or the catalogue name of a downloaded one")
    convert.add_argument("--out", type=Path, help="the GGUF to write (default: in Sharpen's data dir)")
    convert.add_argument("--quantization", choices=QUANTIZATIONS, default="Q8_0", help="of the weight matrices")


def models(args: argparse.Namespace) -> int:
    actions = {
        "list": list_models,
        "pull": pull_model,
        "rm": remove_model,
        "info": model_info,
        "use": use_model,
        "convert": convert_model,
    }
    return actions[args.action or "list"](args)


def list_models(args: argparse.Namespace) -> int:
    models = service().models
    statuses = models.statuses()
    found, skipped = models.found_models()
    if args.json:
        listed = [status.as_json() for status in statuses]
        listed += [model.as_json() | {"in_use_for": list(models.in_use_for(model.name))} for model in found]
        print(json.dumps(listed, indent=2))
        return 0
    for status in statuses:
        entry = status.entry
        used = f"  [in use for {', '.join(status.in_use_for)}]" if status.in_use_for else ""
        fit = "" if status.fit.fits else "  (too big for this machine)"
        print(f"{entry.name:26} {entry.role:9} {entry.engine:16} {status.size_label:>11}{used}{fit}")
        print(f"    {entry.description}")
    if found:
        print("\nFound on this machine, used where they lie:")
    for model in found:
        print(found_line(model, models.in_use_for(model.name)))
    if skipped:
        print(f"\n{len(skipped)} file(s) in those stores skipped: `sharpen doctor` says why.")
    print("\n`sharpen models pull NAME` downloads one; `sharpen models use NAME --for complete|write|draft` switches.")
    return 0


def found_line(model: FoundModel, in_use_for: tuple[str, ...]) -> str:
    """A found model in two lines: its name, store and what it runs as; its facts, or why it cannot run."""
    info, verdict = model.info, model.verdict
    used = f"  [in use for {', '.join(in_use_for)}]" if in_use_for else ""
    runs = f"runs as {verdict.label}" if verdict.runs_as else "cannot run"
    context = f"context {info.context_length:,}" if info.context_length else "context ?"
    facts = f"{info.architecture}, {info.file_type or '?'}, {info.file_size / 1e6:,.0f} MB, {context}"
    why = f": {verdict.reason}" if verdict.reason else ""
    return f"{model.name:40} {model.store_label:14} {runs}{used}\n    {facts}{why}"


class ProgressLine:
    """One progress line on stderr: redrawn in place on a terminal, every 10% otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()
        self.last_decile: dict[str, int] = {}

    def __call__(self, event: PullProgress) -> None:
        total = event.total_bytes or 0
        share = event.done_bytes / total if total else 0.0
        rate = event.done_bytes / max(1e-6, time.monotonic() - self.started)
        line = (
            f"{event.model}: {event.file} [{event.file_index}/{event.file_count}] {share:6.1%} "
            f"{gb(event.done_bytes)} of {gb(total) if total else '?'} ({rate / 1e6:.1f} MB/s)"
        )
        if self.tty:
            print(f"\r{line}\x1b[K", end="", file=sys.stderr, flush=True)
            return
        decile = int(share * 10)
        if self.last_decile.get(event.file, -1) < decile:
            self.last_decile[event.file] = decile
            print(line, file=sys.stderr, flush=True)

    def twin(self, done: int, total: int) -> None:
        """Writing a diffusion GGUF's cacheable twin (a copy of its tensors under another architecture)."""
        share = done / total if total else 1.0
        self._step("twin", f"cacheable twin: {share:6.1%} of {gb(total)}", share)

    def converted(self, done: int, total: int) -> None:
        """Converting a checkpoint to GGUF, tensor by tensor."""
        self._step("convert", f"converting: tensor {done} of {total}", done / total if total else 1.0)

    def _step(self, key: str, line: str, share: float) -> None:
        if self.tty:
            print(f"\r{line}\x1b[K", end="", file=sys.stderr, flush=True)
        elif self.last_decile.get(key, -1) < int(share * 10):
            self.last_decile[key] = int(share * 10)
            print(line, file=sys.stderr, flush=True)

    def finish(self) -> None:
        if self.tty:
            print(file=sys.stderr)


def pull_model(args: argparse.Namespace) -> int:
    progress = ProgressLine()
    models = service().models
    try:
        result = models.pull(
            args.name, offline=args.offline, force=args.force, progress=progress, twin_progress=progress.twin
        )
    finally:
        progress.finish()
    fetched = f"downloaded {result.downloaded_files} file(s)" if result.downloaded_files else "already in the cache"
    print(f"{args.name}: {fetched}, {gb(result.bytes_on_disk)}, {result.verified_files} file(s) verified")
    print(result.path)
    if models.entry(args.name).role == "draft" and result.path.is_file():
        with contextlib.suppress(ModelError):
            note = models.served_file(result.path, write=False).note
            if note:
                print(f"{args.name}: {note}")
    return 0


def remove_model(args: argparse.Namespace) -> int:
    freed = service().models.remove(args.name)
    print(f"{args.name}: {'removed, ' + gb(freed) + ' freed' if freed else 'was not downloaded; nothing to remove'}")
    return 0


def model_info(args: argparse.Namespace) -> int:
    info = service().models.info(args.name)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return 0
    for key, value in info.items():
        if key == "file" and isinstance(value, dict):
            print("file:")
            for inner, detail in value.items():
                print(f"  {inner:22} {detail}")
        else:
            print(f"{key:24} {value}")
    return 0


def use_model(args: argparse.Namespace) -> int:
    sharpen = service()
    stored = sharpen.use_model(args.role, args.name, force=args.force)
    print(f"models.{args.role} = {stored}")
    if args.force and sharpen.config.models.check_fit:
        set_value(sharpen.paths.config_file, "models.check_fit", "false")
        print(
            "models.check_fit = false  (forced: Sharpen will load it without the fit check; "
            "`sharpen config set models.check_fit true` restores the check)"
        )
    return 0


def convert_model(args: argparse.Namespace) -> int:
    sharpen = service()
    folder = Path(args.source).expanduser()
    if not folder.is_dir():
        folder = sharpen.models.resolve(args.source).path
    target = args.out or sharpen.paths.data_dir / "converted" / f"{folder.name}.{args.quantization}.gguf"
    target.parent.mkdir(parents=True, exist_ok=True)
    progress = ProgressLine()
    try:
        written = write_checkpoint_gguf(folder, target, args.quantization, progress.converted)
    finally:
        progress.finish()
    print(f"{written} ({gb(written.stat().st_size)})")
    print(f"use it for drafts: sharpen config set models.draft {written}")
    return 0


def inspect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path")
    parser.add_argument("--json", action="store_true")


def inspect(args: argparse.Namespace) -> int:
    path = Path(args.path).expanduser()
    summary = inspect_checkpoint(path).summary() if path.is_dir() else inspect_gguf(path).summary()
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        for key, value in summary.items():
            print(f"{key:24} {value}")
    return 0


COMMANDS = (
    Command("models", "list, download, inspect, remove and switch models", models_arguments, models),
    Command("inspect", "show what a GGUF file or a checkpoint folder says about itself", inspect_arguments, inspect),
)
