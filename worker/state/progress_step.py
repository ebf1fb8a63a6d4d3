"""Where a running task stands (`Step`), where that is shown (`Display`), and the one-line words
for what happened: a tool call, a supervisor's finding, a STATUS block.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from worker.models import AgentEvent, EventKind
from worker.status import parse_status

_ARG_KEYS = ("command", "file_path", "path", "notebook_path", "pattern", "url", "query", "prompt")


@dataclass
class Step:
    """Where a task stands: the iteration running now and what its agent does."""

    task_id: str
    title: str
    mode: str = ""
    model: str = ""
    iteration: int = 0
    max_iterations: int = 0
    seq: int = 0
    cost_before: float = 0.0  # the task's cost before this iteration
    started_at: float = field(default_factory=time.time)
    step_started_at: float = field(default_factory=time.time)
    cost_usd: float = 0.0  # this iteration's, once known
    input_tokens: int = 0
    output_tokens: int = 0
    tool: str | None = None  # `Bash: pytest -q`
    finding: str | None = None
    tools: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    status: str | None = None  # the STATUS line the agent printed in this iteration

    @property
    def total_cost(self) -> float:
        return self.cost_before + self.cost_usd


class Display(Protocol):
    """Where progress is shown (`worker.cli.ui.LiveProgress`); any method may do nothing."""

    def step(self, step: Step) -> None: ...
    def changed(self, step: Step) -> None: ...
    def said(self, step: Step, text: str) -> None: ...
    def phase(self, name: str) -> None: ...
    def phase_end(self, text: str | None) -> None: ...
    def start(self, text: str) -> None: ...
    def update(self, text: str) -> None: ...
    def stop(self, text: str) -> None: ...


def tool_summary(event: AgentEvent, width: int = 60) -> str:
    """`Bash: pytest -q`: the tool and the first telling argument, on one short line."""
    args = event.args or {}
    value = next((args[k] for k in _ARG_KEYS if isinstance(args.get(k), str) and args[k]), "")
    text = " ".join(str(value).split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    return f"{event.tool}: {text}" if text else str(event.tool)


def finding_line(finding: str) -> str:
    """`supervisor: ...`, unless the finding says who it is from already."""
    said = finding.lstrip("[ ").lower().startswith("supervisor")
    return finding if said else f"supervisor: {finding}"


def status_line(event: AgentEvent) -> str | None:
    """`STATUS: continue - halfway` when this event's text holds a complete STATUS block."""
    if event.kind not in (EventKind.TEXT, EventKind.RESULT) or not event.text:
        return None
    if "STATUS" not in event.text.upper():
        return None  # most text events: no block to parse
    block = parse_status(event.text)
    if block.status is None:
        return None
    reason = " ".join((block.reason or "").split())[:200]
    return f"STATUS: {block.status}" + (f" - {reason}" if reason else "")
