"""`sharpen models` (list, pull, rm, info, use, convert) and `sharpen inspect`."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

from app.cli.common import Command, gb, service
from app.orchestration.gguf_pulls import convert
from app.orchestration.gguf_pulls import pull_gguf as pull_gguf_ready
from app.orchestration.model_manager import ROLES
from app.storage.config import set_value
from models.checkpoint_gguf import QUANTIZATIONS
from models.errors import ModelError
from models.found.stores import FoundModel
from models.gguf_info import inspect_gguf
from models.gguf_pull import StageProgress
from models.hf_checkpoint import inspect_checkpoint
from models.hub import PullError, PullProgress

BAR_WIDTH = 24


def quantization_argument(parser: argparse.ArgumentParser, *, default: str | None) -> None:
    parser.add_argument(
        "--quantization", choices=QUANTIZATIONS, default=default, help="of the GGUF's weight matrices (Q8_0)"
    )


def models_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true")
    actions = parser.add_subparsers(dest="action")
    listing = actions.add_parser("list", help="the models Sharpen knows, which are present, which fit")
    listing.add_argument("--json", action="store_true")
    pull = actions.add_parser("pull", help="download a model from the Hugging Face Hub into the HF cache")
    pull.add_argument("name")
    pull.add_argument("--offline", action="store_true", help="use only the local cache (as HF_HUB_OFFLINE=1)")
    pull.add_argument("--force", action="store_true", help="download even if it does not fit this machine")
    pull.add_argument(
        "--gguf",
        action="store_true",
        help="a block-causal checkpoint (SDAR, Fast-dLLM v2) ready for llama.cpp: download, convert, check",
    )
    quantization_argument(pull, default=None)
    pull.add_argument(
        "--drop-safetensors",
        action="store_true",
        help="with --gguf: remove the safetensors from the HF cache once the GGUF is checked (torch needs them)",
    )
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
    quantization_argument(convert, default="Q8_0")


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
        print(f"{entry.name:26} {entry.role:9} {status.engine:16} {status.size_label:>11}{used}{fit}")
        print(f"    {entry.description}")
    if found:
        print("\nFound on this machine, used where they lie:")
    for model in found:
        print(found_line(model, models.in_use_for(model.name)))
    if skipped:
        print(f"\n{len(skipped)} file(s) in those stores skipped: `sharpen doctor` says why.")
    print(
        "\n`sharpen models pull NAME` downloads one (`--gguf`: an SDAR or Fast-dLLM v2 model ready for llama.cpp); "
        "`sharpen models use NAME --for complete|write|draft` switches."
    )
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

    def stage(self, event: StageProgress) -> None:
        """One bar for a pull ready for llama.cpp: the download and the conversion are stages of it."""
        filled = round(event.share * BAR_WIDTH)
        line = f"{event.model}: [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {event.share:6.1%} {event.detail}"
        self._step("stages", line, event.share)

    def finish(self) -> None:
        if self.tty:
            print(file=sys.stderr)


def pull_model(args: argparse.Namespace) -> int:
    if args.gguf:
        return pull_gguf(args)
    if args.quantization or args.drop_safetensors:
        flag = "--quantization" if args.quantization else "--drop-safetensors"
        raise PullError(f"{flag} goes with --gguf (`sharpen models pull {args.name} --gguf {flag} ...`)")
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


def pull_gguf(args: argparse.Namespace) -> int:
    sharpen = service()
    progress = ProgressLine()
    try:
        pulled = pull_gguf_ready(
            sharpen.models,
            args.name,
            quantization=args.quantization or "Q8_0",
            drop_safetensors=args.drop_safetensors,
            offline=args.offline,
            force=args.force,
            progress=progress.stage,
        )
    finally:
        progress.finish()
    download = pulled.download
    if download is None:
        done = "its GGUF was already written"
    else:
        fetched = f"downloaded {download.downloaded_files} file(s)" if download.downloaded_files else "in the cache"
        converted = "converted" if pulled.converted else "its GGUF was already written"
        done = f"{fetched}, {download.verified_files} file(s) verified, {converted}"
    print(f"{args.name}: {done}, checked ({gb(pulled.gguf.stat().st_size)})")
    print(pulled.gguf)
    entry = sharpen.models.entry(args.name)
    runs = [f"the {entry.decoding_sampler} sampler"]
    if entry.decoding_block_length:
        runs.insert(0, f"blocks of {entry.decoding_block_length}")
    if entry.decoding_threshold:
        runs.append(f"threshold {entry.decoding_threshold:g}")
    print(f"{args.name} drafts on llama.cpp with {', '.join(runs)}: sharpen models use {args.name} --for draft")
    if pulled.dropped_bytes:
        print(f"{args.name}: its safetensors were removed from the Hugging Face cache ({gb(pulled.dropped_bytes)})")
    elif not args.drop_safetensors:
        print(
            f"{args.name}: its safetensors stay in the Hugging Face cache for torch (--drop-safetensors removes them)"
        )
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
    models = service().models
    progress = ProgressLine()
    try:
        written = convert(models, args.source, args.quantization, args.out, progress.converted)
    finally:
        progress.finish()
    print(f"{written} ({gb(written.stat().st_size)})")
    by_name = args.out is None and args.source in models.catalogue()
    if by_name:
        print(f"use it for drafts: sharpen models use {args.source} --for draft  (its name now runs this GGUF)")
    else:
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
