"""A recording as one self-contained SVG whose frames are `<g>` groups shown in turn by CSS `@keyframes` (no
script, so it plays in a browser and in a GitHub README), looping."""

from __future__ import annotations

from xml.sax.saxutils import escape

from app.recording.frames import BACKGROUND, BOLD, COLOURS, Mark
from app.recording.screens import STATUS_COLOUR, ExportOptions, Recording

FONT_SIZE = 14
CELL_WIDTH = FONT_SIZE * 0.6  # a monospace font's advance
LINE_HEIGHT = FONT_SIZE * 1.25
PADDING = 10
FONT_FAMILY = "'DejaVu Sans Mono', 'Menlo', 'Consolas', 'Liberation Mono', monospace"
# The class each mark is drawn with in the SVG.
SVG_CLASSES = {
    Mark.MASKED: "m",
    Mark.LOW: "l",
    Mark.MEDIUM: "o",
    Mark.HIGH: "h",
    Mark.SETTLED: "s",
    Mark.WRITTEN: "w",
    Mark.LABEL: "lb",
}
STATUS_CLASS = "st"


def _number(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _percent(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".") + "%"


def render_svg(recording: Recording, options: ExportOptions) -> bytes:
    drawn, times, length = recording.screens, recording.times, recording.length
    width = 2 * PADDING + options.width * CELL_WIDTH
    height = 2 * PADDING + options.height * LINE_HEIGHT
    css = [
        f"text{{font-family:{FONT_FAMILY};font-size:{FONT_SIZE}px;white-space:pre}}",
        *(
            f".{SVG_CLASSES[mark]}{{fill:{COLOURS[mark]}{';font-weight:bold' if mark in BOLD else ''}}}"
            for mark in Mark
        ),
        f".{STATUS_CLASS}{{fill:{STATUS_COLOUR}}}",
        ".frame{opacity:0}.last{opacity:1}",
    ]
    if len(drawn) > 1:
        for index, start in enumerate(times):
            end = times[index + 1] if index + 1 < len(times) else length
            first, shown_until = 100 * start / length, 100 * end / length
            steps = [("0%", 1 if index == 0 else 0)]
            if index > 0:
                steps.append((_percent(first), 1))
            if index + 1 < len(times):
                steps.append((_percent(shown_until), 0))
            steps.append(("100%", 1 if index + 1 == len(times) else 0))
            keyframes = "".join(f"{at}{{opacity:{opacity}}}" for at, opacity in steps)
            css.append(f"@keyframes k{index}{{{keyframes}}}")
            css.append(f".f{index}{{animation:k{index} {_number(length)}s steps(1,end) infinite}}")
        css.append("@media (prefers-reduced-motion:reduce){.frame{animation:none}}")
    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" xml:space="preserve" '
        f'width="{_number(width)}" height="{_number(height)}" viewBox="0 0 {_number(width)} {_number(height)}">',
        f"<title>{escape(recording.title)}</title>",
        f"<style>{''.join(css)}</style>",
        f'<rect width="100%" height="100%" rx="6" fill="{BACKGROUND}"/>',
    ]
    for index, screen in enumerate(drawn):
        last = " last" if index + 1 == len(drawn) else ""
        where = "".join(f' data-{name}="{escape(value)}"' for name, value in screen.steps.items())
        parts.append(f'<g class="frame f{index}{last}"{where}>')
        for number, row in enumerate(screen.rows):
            y = _number(PADDING + number * LINE_HEIGHT + FONT_SIZE)
            for run in row:
                if run.mark == Mark.SETTLED and not run.text.strip():
                    continue  # nothing to see
                parts.append(
                    f'<text class="{SVG_CLASSES[run.mark]}" x="{_number(PADDING + run.column * CELL_WIDTH)}" y="{y}" '
                    f'textLength="{_number(run.cells * CELL_WIDTH)}" lengthAdjust="spacingAndGlyphs">'
                    f"{escape(run.text)}</text>"
                )
        if options.height > 1:
            y = _number(PADDING + (options.height - 1) * LINE_HEIGHT + FONT_SIZE)
            parts.append(f'<text class="{STATUS_CLASS}" x="{PADDING}" y="{y}">{escape(screen.status)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return ("\n".join(parts) + "\n").encode("utf-8")
