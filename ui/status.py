"""The status bar: engine and model, progress of the current draft, speed, and the route's reason."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


@dataclass(frozen=True)
class StatusInfo:
    engine: str = ""
    model: str = ""
    passes: int = 0
    planned_passes: int | None = None
    tokens: int = 0
    tokens_per_s: float = 0.0
    elapsed_s: float = 0.0
    reason: str = ""
    state: str = "ready"
    autocomplete: bool = True

    def but(self, **changes: Any) -> StatusInfo:
        return replace(self, **changes)


class StatusBar(Widget):
    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; color: $text; padding: 0 1; }
    """

    info: reactive[StatusInfo] = reactive(StatusInfo)

    def render(self) -> Text:
        info = self.info
        parts = [Text(info.state, style="bold")]
        if info.engine:
            parts.append(Text(f"{info.engine} · {info.model}"))
        if info.engine == "diffusion" and info.passes:
            planned = f" of {info.planned_passes}" if info.planned_passes else ""
            parts.append(Text(f"pass {info.passes}{planned}"))
        if info.tokens:
            parts.append(Text(f"{info.tokens} tok · {info.tokens_per_s:.1f} tok/s · {info.elapsed_s:.1f} s"))
        if info.reason:
            parts.append(Text(info.reason, style="italic"))
        parts.append(Text("ghost on" if info.autocomplete else "ghost off", style="dim"))
        return Text(" │ ").join(parts)
