"""Does the writing model remember a conversation? Short chats through the service (greedy, as
`POST /v1/chat/completions` answers them): the user tells something, the assistant acknowledges it, the user asks
it back; a reply counts where it says what was told. Two sets: "names", the server test's conversation
("My name is X." / "Nice to meet you, X." / "What is my name?") with six names, and "facts", a city, a kitten's
name, a job and a gate code, six each (training/chat_probes.py: held out of the writing adapter's chat turns).

    flock /tmp/sharpen-cpu.lock .venv/bin/python bench/chat_recall.py [--set models.write=MERGED.gguf] [--show]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import training_path  # noqa: F401  (training/ importable)
from drafter_vs_ar import fresh_install
from embedded_quality import repeated_trigrams
from machine import describe_machine

from training.chat_probes import probes

TOKENS = 48


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting changed")
    parser.add_argument("--show", action="store_true", help="print every reply")
    args = parser.parse_args()
    service = fresh_install(args.set)
    print(f"machine: {describe_machine()}")
    print(f"command: {' '.join(['python', *sys.argv])}")
    print(f"writing model: {service.engines.writing_model}; greedy, {TOKENS} tokens")
    for label, rows in probes().items():
        recalled, repeats, by_kind = 0, 0.0, dict[str, int]()
        for kind, value, turns in rows:
            service.engines.writer().forget_cache()  # each from a cold cache
            reply = service.chat(turns, max_tokens=TOKENS, temperature=0.0).text()
            hit = value.lower() in reply.lower()
            recalled += hit
            by_kind[kind] = by_kind.get(kind, 0) + hit
            repeats += repeated_trigrams(reply)
            if args.show:
                print(f"  {label} {kind} {value}: {'ok  ' if hit else 'MISS'} {reply[:90]!r}")
        kinds = ", ".join(f"{kind} {n}" for kind, n in by_kind.items())
        print(f"{label}: {recalled} of {len(rows)} recalled ({kinds}); repeated 3-grams {repeats / len(rows):.0%}")


if __name__ == "__main__":
    main()
