"""The one place that talks to Rich: consoles, JSON output and the live progress panel.

On a terminal each iteration gets a live panel; elsewhere (cron mail, pipes) plain lines.
NO_COLOR is honoured by Rich itself. Every text printed here goes through `humanize.visible`:
a control character in an agent's words (an escape opening an OSC 52 clipboard write, a title,
a clear screen) is shown as its escape, never obeyed by the terminal. JSON output escapes them
itself. The consoles are built on first use: a `--json` run, or
a cron run with nothing to say, never loads Rich.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from worker.humanize import visible

if TYPE_CHECKING:
    from rich.console import Console

    from worker.state.progress import Step


@functools.cache
def _console(stderr: bool) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def _out() -> Console:
    return _console(False)


def _err() -> Console:
    return _console(True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str, sort_keys=False) + "\n")


def print_jsonl(data: Any) -> None:
    """One JSON object on one line, flushed (a stream another program reads as it comes)."""
    sys.stdout.write(json.dumps(data, default=str) + "\n")
    sys.stdout.flush()


def error(message: str) -> None:
    _err().print(f"[bold red]error:[/] {_as_text(message)}", markup=True, highlight=False)


def warn(message: str) -> None:
    """A warning on stderr, unless `--quiet` (or `--log-level error`) asked for errors only."""
    if not logging.getLogger("worker").isEnabledFor(logging.WARNING):
        return
    _err().print(f"[yellow]warning:[/] {_as_text(message)}", markup=True, highlight=False)


def _as_text(message: str) -> str:
    """The message as text, not markup: `[github]` in a message is printed, not taken (and
    dropped) as a style, and `[/x]` does not raise."""
    from rich.markup import escape  # with the console, on first use

    return escape(visible(message))


class LogLines(logging.Handler):
    """Log records on stderr: `warning: ...` lines (no traceback) unless --verbose, where
    they keep their time, level, logger and traceback."""

    def __init__(self, verbose: bool = False) -> None:
        super().__init__()
        self.verbose = verbose
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.verbose:
                text = self.format(record)
            else:
                text = f"{record.levelname.lower()}: {record.getMessage()}"
            _err().print(visible(text), markup=False, highlight=False)
        except Exception:
            self.handleError(record)


def line(text: str) -> None:
    _out().print(visible(text), markup=False, highlight=False)


def table(rows: list[dict[str, Any]], columns: list[str], title: str | None = None) -> None:
    """A table on a terminal, tab-separated lines elsewhere (easy to grep)."""
    if not _out().is_terminal:
        # Plain tab-separated lines (Rich would expand the tabs), easy to cut and grep.
        lines = [visible(title)] if title else []
        lines.append("\t".join(columns))
        lines += ["\t".join(_cell(row.get(col)) for col in columns) for row in rows]
        sys.stdout.write("\n".join(lines) + "\n")
        return
    from rich.table import Table

    grid = Table(title=visible(title) if title else None)
    for col in columns:
        grid.add_column(col, overflow="fold")  # long ids and codes wrap, never cut
    for row in rows:
        grid.add_row(*(_cell(row.get(col)) for col in columns))
    _out().print(grid)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return visible(",".join(str(v) for v in value))
    if isinstance(value, float):
        return f"{value:.3f}"
    return visible(str(value))


class LiveProgress:
    """The task's progress (a `worker.state.progress.Display`): on a terminal a live panel whose
    clock ticks while the agent is silent; elsewhere (cron, journald) plain timestamped lines
    for the events that matter; nothing at all when quiet."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.live_ok = not quiet and _out().is_terminal
        self._live: Any = None
        self._step: Step | None = None
        self._said: str | None = None  # the last finding printed as a plain line
        self._phase: tuple[str, float] | None = None  # a step of its own: name, start

    # -- the loop's calls -------------------------------------------------------------------
    def step(self, step: Step) -> None:
        self._step = step
        if not self.live_ok:
            self._plain(f"{step.task_id}: {_where(step)} started")

    def changed(self, step: Step) -> None:
        if self.live_ok or step.finding is None or step.finding == self._said:
            return
        self._said = step.finding
        self._plain(f"{step.task_id}: {_finding_line(step.finding)}")

    def said(self, step: Step, text: str) -> None:
        """A tool call or a STATUS block, as it happens: a line of its own off a terminal
        (the live panel shows the current tool instead)."""
        if not self.live_ok:
            self._plain(f"{step.task_id}: {text}")

    def start(self, text: str) -> None:
        self._start_live()

    def update(self, text: str) -> None:
        """The loop's own status text: the live panel draws from the step instead."""

    def stop(self, text: str) -> None:
        self._stop_live()
        self._plain(f"{self._step.task_id}: {text}" if self._step else text)

    def phase(self, name: str) -> None:
        """A step of its own after the task (the reviewers): a ticking clock on a terminal."""
        self._phase = (name, time.time())
        self._start_live()

    def phase_end(self, text: str | None) -> None:
        self._stop_live()
        self._phase = None
        if text:
            self._plain(text)

    def _start_live(self) -> None:
        if not self.live_ok or self._live is not None:
            return
        from rich.live import Live

        self._live = Live(_Panel(self), console=_out(), refresh_per_second=4, transient=True)
        self._live.start()

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def note(self, text: str) -> None:
        """A line of its own (a reviewer's step, a cycle), timestamped off a terminal."""
        self._plain(text)

    def _plain(self, text: str) -> None:
        if self.quiet:
            return
        if self.live_ok:
            line(text)
        else:
            line(f"{datetime.now().astimezone():%Y-%m-%d %H:%M:%S} {text}")

    def lines(self, now: float | None = None) -> list[str]:
        """The live panel's text (tests read it without a terminal)."""
        now = time.time() if now is None else now
        if self._phase is not None:
            name, since = self._phase
            return [f"{name}: running  {_clock(now - since)}"]
        step = self._step
        if step is None:
            return []
        lines = [
            f"{step.task_id}: {step.title}"[:200],
            f"{_where(step)}  {_clock(now - step.step_started_at)}"
            f" (task {_clock(now - step.started_at)})",
            f"tool: {step.tool or '-'}",
            f"tokens: {step.input_tokens:,} in, {step.output_tokens:,} out   "
            f"cost: ${step.total_cost:.4f}",
        ]
        if step.finding:
            lines.append(_finding_line(step.finding))
        return lines


class _Panel:
    """Rendered on every refresh, so the clock moves without any event."""

    def __init__(self, progress: LiveProgress) -> None:
        self.progress = progress

    def __rich__(self) -> Any:
        from rich.text import Text

        return Text(visible("\n".join(self.progress.lines())))


def _finding_line(finding: str) -> str:
    """As `worker.state.progress.finding_line` (not imported: ui stays light for every command)."""
    said = finding.lstrip("[ ").lower().startswith("supervisor")
    return finding if said else f"supervisor: {finding}"


def _where(step: Step) -> str:
    return f"{step.mode} ({step.model}) iteration {step.iteration}/{step.max_iterations}"


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def emit(data: dict[str, Any], as_json: bool, render: Callable[[dict[str, Any]], None]) -> None:
    if as_json:
        print_json(data)
    else:
        render(data)
