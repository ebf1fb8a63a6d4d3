"""The agent adapter protocol and the registry of built-in adapters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from worker.models import AgentEvent, AgentRequest, AgentResult

# Called for every normalised event while the agent runs; a returned string stops the agent
# (the whole process group) with that reason. This is where the supervisor listens.
EventHandler = Callable[[AgentEvent], str | None]


class AgentAdapter(Protocol):
    """Drives one agent CLI for one iteration and reports what it did as AgentEvents."""

    name: str

    def command(self, request: AgentRequest) -> list[str]:
        """The exact command line this request runs (shown by `--dry-run`)."""
        ...

    def run(self, request: AgentRequest, on_event: EventHandler | None = None) -> AgentResult:
        """Run the agent to its end (or timeout, or a stop from `on_event`)."""
        ...
