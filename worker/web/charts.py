"""Bar charts as plain SVG geometry, drawn by the template: no chart library, no script."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WIDTH, HEIGHT, PAD = 720, 220, 30


@dataclass
class Bar:
    label: str
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
        x = PAD + i * step + step * 0.1
        chart.bars.append(Bar(str(row["key"]), usd, x, HEIGHT - PAD - h, step * 0.8, h))
    if cap:
        chart.cap_y = HEIGHT - PAD - inner_h * cap / top
    return chart
