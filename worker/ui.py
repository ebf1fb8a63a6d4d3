"""The one place that talks to Rich: consoles, JSON output and the live iteration line.

On a terminal each iteration gets a live line; elsewhere (cron mail, pipes) plain lines.
NO_COLOR is honoured by Rich itself.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str, sort_keys=False) + "\n")


def error(message: str) -> None:
    err.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {message}", markup=True, highlight=False)


def line(text: str) -> None:
    out.print(text, markup=False, highlight=False)


def table(rows: list[dict[str, Any]], columns: list[str], title: str | None = None) -> None:
    """A table on a terminal, tab-separated lines elsewhere (easy to grep)."""
    if not out.is_terminal:
        # Plain tab-separated lines (Rich would expand the tabs), easy to cut and grep.
        lines = [title] if title else []
        lines.append("\t".join(columns))
        lines += ["\t".join(_cell(row.get(col)) for col in columns) for row in rows]
        sys.stdout.write("\n".join(lines) + "\n")
        return
    from rich.table import Table

    grid = Table(title=title)
    for col in columns:
        grid.add_column(col)
    for row in rows:
        grid.add_row(*(_cell(row.get(col)) for col in columns))
    out.print(grid)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


class IterationProgress:
    """A live status line while an agent runs (a terminal), or one plain line per iteration."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.live = out.is_terminal and enabled
        self._status: Any = None

    def start(self, text: str) -> None:
        if not self.enabled:
            return
        if self.live:
            self._status = out.status(text)
            self._status.start()
        else:
            line(text)

    def update(self, text: str) -> None:
        if self._status is not None:
            self._status.update(text)

    def stop(self, text: str) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
        if self.enabled:
            line(text)


def emit(data: dict[str, Any], as_json: bool, render: Callable[[dict[str, Any]], None]) -> None:
    if as_json:
        print_json(data)
    else:
        render(data)
