"""What the draft panel says of a draft: the route (who writes it and why, both engines' estimates, how to have the
other engine write it too) and each candidate's label (its engine, its time, its speed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from app.domain.figures import ENGINE_LABELS, DraftFigures, other_engine
from router.request import EngineName, Route


def route_line(route: Route, advice: Route | None, other_key: str) -> str:
    """Who writes the draft, both engines' estimates, the key for the other engine's draft, then why (the part a
    narrow panel cuts): "AR, the router's choice · estimated for 48 tokens: AR 1.2 s, diffusion 3.4 s · ctrl+e:
    diffusion's draft too · why: <the router's reason>". For an engine the writer chose, `advice` is the route the
    router would have given the request."""
    chosen = ENGINE_LABELS[route.engine]
    decided = advice if route.rule == "forced" else route
    if route.rule != "forced":
        parts = [f"{chosen}, the router's choice"]
    elif advice is not None and advice.engine == route.engine:
        parts = [f"{chosen}, as chosen (the router's choice too)"]
    elif advice is not None:
        parts = [f"{chosen}, as chosen (the router would choose {ENGINE_LABELS[advice.engine]})"]
    else:
        parts = [f"{chosen}, as chosen"]
    estimates = (advice or route).estimates
    if estimates:
        figures = ", ".join(f"{ENGINE_LABELS[e]} {estimates[e].seconds_as_asked:.1f} s" for e in sorted(estimates))
        parts.append(f"estimated for {route.max_tokens} tokens: {figures}")
    other = other_engine(route.engine)
    if other in route.estimates:
        parts.append(f"{other_key}: {ENGINE_LABELS[other]}'s draft too")
    elif route.rule == "remote_down":
        parts.append(f"the {ENGINE_LABELS[other]} engine on another machine does not answer")
    else:
        parts.append(f"no {ENGINE_LABELS[other]} model is configured (f2 chooses one)")
    if decided is not None:
        parts.append(f"why: {decided.reason}")
    return " · ".join(parts)


@dataclass(frozen=True)
class CandidateState:
    """One candidate as its label needs it: its engine once routed, its figures once finished, else its state."""

    engine: EngineName | None
    figures: DraftFigures | None
    state: str


def candidate_label(candidate: CandidateState) -> str:
    if candidate.figures is not None:
        return candidate.figures.label()
    engine = ENGINE_LABELS[candidate.engine] if candidate.engine is not None else "routing"
    return f"{engine} · {candidate.state}"


def candidates_strip(candidates: Sequence[CandidateState], shown: int) -> Text:
    """Every candidate's label side by side, numbered, the one shown in bold and marked."""
    strip = Text(no_wrap=False)
    for number, candidate in enumerate(candidates):
        if number:
            strip.append("  │  ", style="dim")
        label = f"{number + 1}. {candidate_label(candidate)}"
        strip.append(f"▸ {label}" if number == shown else label, style="bold" if number == shown else "dim")
    return strip
