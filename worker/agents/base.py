"""The agent adapter protocol and the registry of built-in adapters."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

from worker.models import AgentEvent, AgentRequest, AgentResult
from worker.process.boundedio import clip_event
from worker.process.proc import LineHandler, ProcResult, output_redactor, redact, run_process
from worker.sandbox.box import launch

# Called for every normalised event while the agent runs; a returned string stops the agent
# (the whole process group) with that reason. This is where the supervisor listens.
EventHandler = Callable[[AgentEvent], str | None]


class AgentAdapter(Protocol):
    """Drives one agent CLI for one iteration and reports what it did as AgentEvents."""

    name: str
    # The CLI resumes a session by id (`AgentRequest.resume_session`): a resumed session holds
    # what it was told before, so the next prompt carries only what is new.
    resumes: bool

    def command(self, request: AgentRequest) -> list[str]:
        """The exact command line this request runs (shown by `--dry-run`)."""
        ...

    def run(self, request: AgentRequest, on_event: EventHandler | None = None) -> AgentResult:
        """Run the agent to its end (or timeout, or a stop from `on_event`)."""
        ...


def run_streaming(
    request: AgentRequest,
    argv: list[str],
    on_line: LineHandler,
    cap_bytes: int,
    on_stderr: LineHandler | None = None,
) -> ProcResult:
    """Run a streaming agent CLI for one request: the prompt on stdin, each line to `on_line`
    (and each stderr line to `on_stderr`), the request's timeout, log, stop event and start
    callback."""
    return launch_agent(
        request,
        argv,
        stdin_text=request.prompt,
        on_line=on_line,
        cap_bytes=cap_bytes,
        on_stderr=on_stderr,
    )


def launch_agent(
    request: AgentRequest,
    argv: list[str],
    *,
    stdin_text: str | None,
    on_line: LineHandler,
    cap_bytes: int,
    on_stderr: LineHandler | None = None,
) -> ProcResult:
    """The one place an agent CLI starts: `argv` in the request's sandbox when it has one
    (worker/sandbox/box.py), through the process chokepoint."""
    with launch(request, argv) as (command, env):
        return run_process(
            command,
            cwd=request.cwd,
            timeout_s=request.timeout_s,
            stdin_text=stdin_text,
            env=env,
            log_path=request.log_path,
            on_line=on_line,
            cap_bytes=cap_bytes,
            stop=request.stop,
            on_start=request.on_start,
            on_stderr=on_stderr,
        )


def with_process(result: AgentResult, proc: ProcResult) -> AgentResult:
    """Copy what only the process knows (timeout, stop, truncation, stderr) into the result."""
    result.timed_out, result.stopped = proc.timed_out, proc.stopped
    result.truncated, result.not_found = proc.truncated, proc.not_found
    result.stderr_tail = proc.stderr_tail
    return result


class EventCollector:
    """Folds one invocation's output into a result, line by line: each line becomes events
    (`normalise`), each event updates the collector (`fold`) and goes to the run's handler
    (the supervisor) until one asks to stop. Subclasses say how to read and what to keep."""

    def __init__(self, on_event: EventHandler | None = None) -> None:
        self.on_event = on_event
        self.events: list[AgentEvent] = []
        self.index = 0
        # Set by a subclass that reads an infrastructure failure worth ending the agent for
        # (a bad key, an API that keeps failing): the agent is stopped with this reason.
        self.halt: str | None = None

    def normalise(self, line: str, index: int) -> list[AgentEvent]:
        raise NotImplementedError

    def fold(self, event: AgentEvent) -> None:
        raise NotImplementedError

    def feed(self, line: str) -> str | None:
        stop = self.take([clip_event(e) for e in self.normalise(line, self.index)])
        self.index += 1
        return stop

    def take(self, events: list[AgentEvent]) -> str | None:
        stop: str | None = None
        for event in events:
            self.events.append(event)
            self.fold(event)
            if self.on_event is not None and stop is None:
                stop = self.on_event(event)
        return stop or self.halt


class Masked:
    """The one door through which an agent's words enter worker: an adapter whose every event
    and result carry the values of the secrets in the environment (and token-shaped strings)
    as `***`. The agent may have read a token anywhere (a file, a tool's output) and repeat it
    in its STATUS block, its wait fields or its last words; whatever worker then stores,
    writes to a file or prints starts from these masked texts. `adapter_for` wraps every
    adapter in one."""

    def __init__(self, inner: AgentAdapter) -> None:
        self.inner = inner
        self.name = inner.name

    def __getattr__(self, name: str) -> Any:  # the adapter's own settings (executable, ...)
        return getattr(self.inner, name)

    def command(self, request: AgentRequest) -> list[str]:
        return self.inner.command(request)

    def run(self, request: AgentRequest, on_event: EventHandler | None = None) -> AgentResult:
        hide = output_redactor()
        handler = None
        if on_event is not None:
            handler = lambda event: on_event(mask_event(event, hide))  # noqa: E731
        return mask_result(self.inner.run(request, handler), hide)


def mask_event(event: AgentEvent, hide: Callable[[str], str]) -> AgentEvent:
    """The event with the secrets in its text, error and tool arguments hidden."""
    text = hide(event.text) if event.text else event.text
    error = hide(event.error) if event.error else event.error
    args = _mask_args(event.args, hide) if event.args else event.args
    if text == event.text and error == event.error and args == event.args:
        return event
    return event._replace(text=text, error=error, args=args)


def _mask_args(value: Any, hide: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return hide(value)
    if isinstance(value, dict):
        return {key: _mask_args(item, hide) for key, item in value.items()}
    if isinstance(value, list):
        return [_mask_args(item, hide) for item in value]
    return value


def mask_result(result: AgentResult, hide: Callable[[str], str]) -> AgentResult:
    """The result with its texts masked: the final text (the STATUS block, the wait fields,
    the snippet kept for a resume), the CLI's error, stderr and every event."""
    return dataclasses.replace(
        result,
        final_text=redact(result.final_text) if result.final_text else "",
        error=redact(result.error) if result.error else result.error,
        stderr_tail=redact(result.stderr_tail) if result.stderr_tail else "",
        subtype=hide(result.subtype) if result.subtype else result.subtype,
        events=[mask_event(event, hide) for event in result.events],
    )
