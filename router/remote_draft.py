"""A draft engine on another machine as routing sees it: whether it can draft now (and if not, why, in one
line), and what its drafts cost from here: the remote Sharpen's own calibration plus the round trip measured
from this machine, or for a text-only server the seconds per token its drafts took."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from router.profile import DiffusionCosts, default_profile

# Before a text-only server's first draft: a consumer GPU's AR speed stands for its seconds per token.
TEXT_ONLY_GUESS_S_PER_TOKEN = default_profile("gpu").ar.seconds_per_token


@dataclass(frozen=True)
class RemoteDraftState:
    """The configured remote draft engine as one probe found it."""

    label: str
    # The model that drafts there (the route names it).
    model: str
    # Why it cannot draft now, one line ("" when it can).
    down: str
    costs: DiffusionCosts
    # Whether its drafts arrive pass by pass (another Sharpen), or as text only (an OpenAI-compatible server).
    animated: bool = True


def remote_costs(
    reported: Mapping[str, Any] | None, round_trip_s: float, text_only_s_per_token: float | None
) -> DiffusionCosts:
    """What a remote draft costs from here: the costs a remote Sharpen reported for its draft model (its
    `/v1/sharpen/status`) with the round trip added, or for a server that reports none (an OpenAI-compatible
    one) the seconds per token its drafts took here (guessed before the first), plus the round trip."""
    if reported is None:
        measured = text_only_s_per_token is not None
        per_token = text_only_s_per_token if measured else TEXT_ONLY_GUESS_S_PER_TOKEN
        return DiffusionCosts(
            round_trip_s=round_trip_s, text_only_s_per_token=per_token or TEXT_ONLY_GUESS_S_PER_TOKEN, measured=measured
        )
    known = {item.name: item.type for item in fields(DiffusionCosts)}
    kept: dict[str, Any] = {}
    for key, value in reported.items():
        kind = known.get(key)
        if kind == "float" and isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            kept[key] = float(value)
        elif (kind == "str" and isinstance(value, str)) or (kind == "bool" and isinstance(value, bool)):
            kept[key] = value
    costs = DiffusionCosts(**kept)
    # A remote that itself drafts on another machine reported its own round trip: this one adds to it.
    return replace(costs, round_trip_s=costs.round_trip_s + round_trip_s)
