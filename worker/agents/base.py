"""The agent adapter protocol and the registry of built-in adapters."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from worker.models import AgentEvent, AgentRequest, AgentResult
from worker.proc import LineHandler, ProcResult, run_process

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


def run_streaming(
    request: AgentRequest, argv: list[str], on_line: LineHandler, cap_bytes: int
) -> ProcResult:
    """Run a streaming agent CLI for one request: the prompt on stdin, each line to `on_line`,
    the request's timeout, log, stop event and start callback."""
    return run_process(
        argv,
        cwd=request.cwd,
        timeout_s=request.timeout_s,
        stdin_text=request.prompt,
        log_path=request.log_path,
        on_line=on_line,
        cap_bytes=cap_bytes,
        stop=request.stop,
        on_start=request.on_start,
    )


def with_process(result: AgentResult, proc: ProcResult) -> AgentResult:
    """Copy what only the process knows (timeout, stop, truncation, stderr) into the result."""
    result.timed_out, result.stopped = proc.timed_out, proc.stopped
    result.truncated, result.not_found = proc.truncated, proc.not_found
    result.stderr_tail = proc.stderr_tail
    return result
