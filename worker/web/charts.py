"""Bar charts as plain SVG geometry, drawn by the template: no chart library, no script."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WIDTH, HEIGHT, PAD = 720, 220, 30


BAR_MAX = 60  # px: a chart of one or two bars keeps them slim


@dataclass
class Bar:
    label: str  # under the bar: a day as MM-DD, a mode in full (cut at 16 characters)
    usd: float
    x: float
    y: float
    w: float
    h: float


@dataclass
class Chart:
    title: str
    bars: list[Bar] = field(default_factory=list)
    cap_y: float | None = None  # where the daily cap's line is drawn
    top_usd: float = 0.0
    width: int = WIDTH
    height: int = HEIGHT


def bar_chart(title: str, rows: list[dict[str, Any]], cap: float | None = None) -> Chart:
    """One bar per row (`key`, `usd`), scaled so the tallest bar or the cap fits."""
    top = max([float(r["usd"] or 0.0) for r in rows] + [cap or 0.0, 0.01])
    chart = Chart(title, top_usd=top)
    inner_w, inner_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD
    step = inner_w / max(len(rows), 1)
    for i, row in enumerate(rows):
        usd = float(row["usd"] or 0.0)
        h = inner_h * usd / top
        w = min(step * 0.8, BAR_MAX)
        x = PAD + i * step + (step - w) / 2
        chart.bars.append(Bar(_label(str(row["key"])), usd, x, HEIGHT - PAD - h, w, h))
    if cap:
        chart.cap_y = HEIGHT - PAD - inner_h * cap / top
    return chart


def _label(key: str) -> str:
    if len(key) == 10 and key[4] == "-" and key[7] == "-":  # a day, 2026-11-22
        return key[5:]
    return key if len(key) <= 16 else key[:15] + "…"
