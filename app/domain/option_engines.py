"""Which engine reads each draft option, and the engine a request's options pin.

Each option says beside its declaration which engines read it (`read_by`: DiffusionSettings' options, and
DraftRequest's own fields). A request that sets an option only one engine reads is drafted by that engine, and
the route's reason says so; an option both engines read pins nothing; an engine asked for that does not read an
option the request sets is an OptionConflict, said in one line. The service pins every draft with `pinned`;
the server asks the same before it chooses between an AR-only call (a chat turn, a completion) and a draft.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import cast

from app.domain.draft_request import DraftRequest
from engines.diffusion.settings import DiffusionSettings
from engines.options import options
from router.request import ENGINES, EngineName

LABELS: dict[EngineName, str] = {"ar": "AR", "diffusion": "diffusion"}


class OptionConflict(ValueError):
    """A request's options, or its options and the engine it asks for, that no one engine reads together."""


def option_engines() -> dict[str, tuple[EngineName, ...]]:
    """Every option a draft may set, by its name, and the engines that read it, as declared: the request's own
    fields first, then DiffusionSettings' options."""
    declared = [item for item in dataclasses.fields(DraftRequest) if "read_by" in item.metadata]
    declared += options(DiffusionSettings)
    return {item.name: cast(tuple[EngineName, ...], item.metadata["read_by"]) for item in declared}


def set_options(request: DraftRequest) -> list[str]:
    """The options `request` sets, in their declared order: its overrides that are not None, and its own
    option fields that differ from their defaults."""
    given = request.given_options
    own = {item.name: item.default for item in dataclasses.fields(DraftRequest)}
    return [name for name in option_engines() if name in given or (name in own and getattr(request, name) != own[name])]


def pinned(request: DraftRequest) -> DraftRequest:
    """`request` with the engine its options pin, and why (`engine_because`), where an option it sets is read by
    one engine only; as it is where it asks for an engine itself or sets only options both engines read.
    Raises OptionConflict where the options, or the options and the engine asked for, disagree."""
    readers = option_engines()
    one_engine = {name: readers[name] for name in set_options(request) if set(readers[name]) != set(ENGINES)}
    engines = [engine for engine in ENGINES if all(engine in read for read in one_engine.values())]
    name = request.spelling
    if not engines:
        by_engine = [
            (engine, [name(option) for option, read in one_engine.items() if engine not in read]) for engine in ENGINES
        ]
        unread = [f"the {LABELS[engine]} engine does not read {_listed(names)}" for engine, names in by_engine]
        raise OptionConflict(f"{', and '.join(unread)}: no engine reads every option given")
    if request.engine is not None:
        unread = [option for option, read in one_engine.items() if request.engine not in read]
        if unread:
            other = LABELS[engines[0]]
            raise OptionConflict(
                f"{name('engine')} asks for the {LABELS[request.engine]} engine, but {_listed(map(name, unread))} "
                f"{_is_or_are(unread)} read only by the {other} engine: drop one or the other"
            )
        return request
    if len(engines) == len(ENGINES):
        return request
    (engine,) = engines
    reason = f"{_listed(map(name, one_engine))} {_is_or_are(list(one_engine))} read only by the {LABELS[engine]} engine"
    return replace(request, engine=engine, engine_because=reason)


def readers_note(option: str) -> str:
    """What a flag's help adds about the engines that read it ("" where both do)."""
    read = option_engines()[option]
    return "" if set(read) == set(ENGINES) else f"read only by the {_listed(LABELS[e] for e in read)} engine"


def option_table(columns: Sequence[tuple[str, Callable[[str], str]]]) -> str:
    """A Markdown table of every draft option: one column per front end (its heading, and how it names an
    option: "" where it takes none), then the engines that read it. The README holds it (a test compares)."""
    head = [*(heading for heading, _spelling in columns), "read by"]
    rows = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for option, read in option_engines().items():
        names = [spelling(option) for _heading, spelling in columns]
        cells = [f"`{spelled}`" if spelled else "—" for spelled in names]
        engines = "both engines" if set(read) == set(ENGINES) else f"{_listed(LABELS[e] for e in read)} only"
        rows.append("| " + " | ".join([*cells, engines]) + " |")
    return "\n".join(rows) + "\n"


def _listed(names: Iterable[str]) -> str:
    items = list(names)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _is_or_are(names: Sequence[str]) -> str:
    return "is" if len(names) == 1 else "are"
