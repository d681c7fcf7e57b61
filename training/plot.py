"""A dependency-free SVG line plot of a training log (loss against tokens seen, log scale)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

WIDTH, HEIGHT, MARGIN = 640, 360, 56
COLOURS = {"train_loss": "#1f77b4", "heldout_loss": "#d62728"}


def plot_log(log: Path, out: Path, title: str) -> Path:
    rows = list(csv.DictReader(log.open()))
    xs = [float(r["tokens_seen"]) for r in rows]
    series = {name: [float(r[name]) for r in rows] for name in COLOURS}
    values = [v for vs in series.values() for v in vs if v == v]
    x_max, y_min, y_max = max(xs) or 1.0, min(values), max(values)

    low, high = math.log(y_min), math.log(y_max)

    def x_at(x: float) -> float:
        return MARGIN + (x / x_max) * (WIDTH - 2 * MARGIN)

    def y_at(y: float) -> float:
        # Log scale: the early fall would otherwise flatten the late, small gains into the axis.
        return HEIGHT - MARGIN - (math.log(y) - low) / ((high - low) or 1) * (HEIGHT - 2 * MARGIN)

    def point(x: float, y: float) -> str:
        return f"{x_at(x):.1f},{y_at(y):.1f}"

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
        f'<line x1="{MARGIN}" y1="{HEIGHT - MARGIN}" x2="{WIDTH - MARGIN}" y2="{HEIGHT - MARGIN}" stroke="black"/>',
        f'<line x1="{MARGIN}" y1="{MARGIN}" x2="{MARGIN}" y2="{HEIGHT - MARGIN}" stroke="black"/>',
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 16}" text-anchor="middle">tokens seen (max {x_max / 1e6:.2f}M)</text>',
        f'<text x="14" y="{HEIGHT / 2}" transform="rotate(-90 14 {HEIGHT / 2})" '
        'text-anchor="middle">masked loss (log scale)</text>',
    ]
    ticks = [y_min, *(t for t in (1.5, 2.0, 3.0, 5.0) if y_min * 1.1 < t < y_max / 1.1), y_max]
    for tick in ticks:
        y = y_at(tick)
        parts.append(f'<text x="{MARGIN - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:.2f}</text>')
        parts.append(f'<line x1="{MARGIN - 3}" y1="{y:.1f}" x2="{MARGIN}" y2="{y:.1f}" stroke="black"/>')
    stages = [r.get("stage") or "1" for r in rows]
    for index in range(1, len(rows)):
        if stages[index] != stages[index - 1]:  # a continued run begins: mark it
            x = x_at(xs[index])
            parts.append(
                f'<line x1="{x:.1f}" y1="{MARGIN}" x2="{x:.1f}" y2="{HEIGHT - MARGIN}" stroke="grey" '
                'stroke-dasharray="4 4"/>'
            )
            parts.append(f'<text x="{x + 4:.1f}" y="{MARGIN + 48}" fill="grey">stage {float(stages[index]):.0f}</text>')
    for index, (name, ys) in enumerate(series.items()):
        points = " ".join(point(x, y) for x, y in zip(xs, ys, strict=True) if y == y)
        colour = COLOURS[name]
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>')
        label = "train (smoothed)" if name == "train_loss" else "held-out"
        parts.append(f'<text x="{WIDTH - MARGIN - 120}" y="{MARGIN + 16 * index}" fill="{colour}">{label}</text>')
    parts.append("</svg>")
    out.write_text("\n".join(parts) + "\n")
    return out
