"""The faithfulness bench's cases (bench/data/faithful_cases.toml): written by hand, frozen by their sha256.

FROZEN_SHA256 is the case file's hash as written; a test checks the file against it, and the bench prints
the hash of the file it ran, so figures from different runs can be shown to come from the same cases.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from faithful_scores import STANCES, Stance

CASES = Path(__file__).resolve().parent / "data" / "faithful_cases.toml"
FROZEN_SHA256 = "434478eda8ed2238e34c75eb6a3c38336ca1518d6287addf18e9567b3546b4da"


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    held_out: bool
    before: str
    after: str
    instruction: str
    tokens: int
    facts: tuple[tuple[str, ...], ...]
    stance: Stance
    names: tuple[str, ...]
    keeps: tuple[str, ...] = ()
    flips: tuple[str, ...] = ()

    @property
    def cursor(self) -> str:
        """Where the cursor is: at the end of the document, or in it (text after it)."""
        return "middle" if self.after else "end"


@dataclass(frozen=True)
class CaseSet:
    held_out_kinds: tuple[str, ...]
    cases: tuple[Case, ...]
    sha256: str


_REQUIRED = {
    "id": str,
    "kind": str,
    "held_out": bool,
    "before": str,
    "after": str,
    "instruction": str,
    "tokens": int,
    "facts": list,
    "stance": str,
    "names": list,
}
_OPTIONAL = {"keeps": list, "flips": list}


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise ValueError(f"{where}: expected a list of non-empty strings")
    return tuple(value)


def _case(table: dict[str, Any], held_out_kinds: set[str]) -> Case:
    where = f"case {table.get('id', '?')!r}"
    for key, kind in _REQUIRED.items():
        value = table.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"{where}: {key} should be of type {kind.__name__}")
    unknown = set(table) - set(_REQUIRED) - set(_OPTIONAL)
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    if table["stance"] not in STANCES:
        raise ValueError(f"{where}: stance must be one of {', '.join(STANCES)}")
    if (table["kind"] in held_out_kinds) != table["held_out"]:
        raise ValueError(f"{where}: held_out must be true exactly for the held-out kinds")
    if table["tokens"] <= 0:
        raise ValueError(f"{where}: tokens must be positive")
    facts = tuple(_strings(fact, f"{where}: a fact") for fact in table["facts"])
    if not facts or not all(facts):
        raise ValueError(f"{where}: a fact: expected a list of non-empty strings, at least one fact")
    if table["stance"] == "none" and ("keeps" in table or "flips" in table):
        raise ValueError(f"{where}: keeps and flips belong to a stance")
    return Case(
        id=table["id"],
        kind=table["kind"],
        held_out=table["held_out"],
        before=table["before"],
        after=table["after"],
        instruction=table["instruction"],
        tokens=table["tokens"],
        facts=facts,
        stance=cast(Stance, table["stance"]),
        names=_strings(table["names"], f"{where}: names"),
        keeps=_strings(table.get("keeps", []), f"{where}: keeps"),
        flips=_strings(table.get("flips", []), f"{where}: flips"),
    )


def load_cases(path: Path = CASES) -> CaseSet:
    """The cases of `path`, checked (ValueError names the first one that is not well formed)."""
    data = path.read_bytes()
    parsed = tomllib.loads(data.decode("utf-8"))
    held_out_kinds = _strings(parsed.get("held_out_kinds"), "held_out_kinds")
    cases = tuple(_case(table, set(held_out_kinds)) for table in parsed.get("case", []))
    ids = [case.id for case in cases]
    if len(set(ids)) != len(ids):
        raise ValueError("case ids must be unique")
    return CaseSet(held_out_kinds, cases, hashlib.sha256(data).hexdigest())


def spread(cases: tuple[Case, ...], count: int) -> list[Case]:
    """`count` cases spread over the set: each group (held out or not, by stance) in proportion to its size,
    in file order within a group; all of them, in file order, when `count` covers the set."""
    if count >= len(cases):
        return list(cases)
    groups: dict[tuple[bool, Stance], list[Case]] = {}
    for case in cases:
        groups.setdefault((case.held_out, case.stance), []).append(case)
    order = {case.id: index for index, case in enumerate(cases)}
    # A case's place in its group, as a share of the group: the groups interleave in proportion.
    ranked = sorted(
        ((rank + 0.5) / len(group), order[case.id], case)
        for group in groups.values()
        for rank, case in enumerate(group)
    )
    chosen = {case.id for _, _, case in ranked[:count]}
    return [case for case in cases if case.id in chosen]
