"""The Claude Code adapter: `claude -p --output-format stream-json --verbose`."""

from __future__ import annotations

import json

from worker.agents.base import EventCollector, EventHandler, run_streaming, with_process
from worker.agents.claude_stream import (
    AUTH_TEXT,
    CLI,
    SESSION_MISSING_TEXT,
    USAGE_LIMIT_TEXT,
    auth_failure,
    infra_failure,
    normalise_line,
)
from worker.agents.jsonl import lines_of
from worker.models import (
    AgentEvent,
    AgentRequest,
    AgentResult,
    EventKind,
    InfraFailure,
    InfraKind,
)
from worker.process.proc import ProcResult

# End the CLI at its 3rd retry of an overloaded or failing API (it would try 10 times over
# minutes); the task then waits and tries again later.
UNAVAILABLE_RETRIES = 3


class ClaudeAdapter:
    name = "claude"
    resumes = True

    def __init__(self, executable: str = "claude", cap_bytes: int = 2_000_000) -> None:
        self.executable = executable
        self.cap_bytes = cap_bytes

    def command(self, request: AgentRequest) -> list[str]:
        # The prompt goes on stdin: a very large -p argument can stall (claude-code issues).
        argv = [
            self.executable,
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            request.model,
        ]
        if request.resume_session:
            # Never --continue: it picks "the latest" session and can hijack another one.
            argv += ["--resume", request.resume_session]
        if request.max_budget_usd is not None:
            argv += ["--max-budget-usd", f"{request.max_budget_usd:.2f}"]
        argv += list(request.extra_args)
        return argv

    def run(self, request: AgentRequest, on_event: EventHandler | None = None) -> AgentResult:
        collector = StreamCollector(on_event)
        proc = run_streaming(request, self.command(request), collector.feed, self.cap_bytes)
        result = with_process(collector.result(proc.exit_code), proc)
        tail = f"{proc.stderr_tail}\n{result.final_text if result.is_error else ''}"
        if (
            not result.usage_limit_hit
            and proc.exit_code not in (0, None)
            and USAGE_LIMIT_TEXT.search(tail + _plain_text(proc.stdout))
        ):
            result.usage_limit_hit = True
        # The CLI fails (exits non-zero) on a session it no longer has: the words alone, which
        # a tool's output may hold, must not start the iteration again in a fresh session.
        if (
            request.resume_session
            and proc.exit_code not in (0, None)
            and SESSION_MISSING_TEXT.search(tail + _plain_text(proc.stdout))
        ):
            result.session_missing = True
        result.infra = collector.infra or _exit_failure(result, proc)
        if result.infra is not None and not result.error:
            result.error = result.infra.message
        return result


def _exit_failure(result: AgentResult, proc: ProcResult) -> InfraFailure | None:
    """What the exit says when the stream said nothing: plain-text key errors, a crash."""
    if result.subtype != "no_result" or result.usage_limit_hit or result.session_missing:
        return None
    # Exit 0 too: `claude -p` always ends its stream with a result, so a clean exit without
    # one is a broken CLI (a wrapper, a stub), not an answer.
    if proc.timed_out or proc.stopped or proc.not_found or proc.exit_code is None:
        return None
    words = f"{proc.stderr_tail}\n{_plain_text(proc.stdout)}".strip()
    lines = words.splitlines()
    said = [line for line in lines if AUTH_TEXT.search(line)]
    if said:
        return auth_failure(said[-1].strip()[:300], None)
    last = lines[-1][:300] if lines else "no output"
    return InfraFailure(
        InfraKind.CLI_CRASH,
        f"{CLI} exited with code {proc.exit_code} without a result: {last}",
    )


class StreamCollector(EventCollector):
    """Folds Claude's stream-json of one invocation into an AgentResult, line by line."""

    def __init__(self, on_event: EventHandler | None = None) -> None:
        super().__init__(on_event)
        self.texts: list[str] = []
        self.final: AgentEvent | None = None
        self.session_id: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.turns = 0
        self.limit_until: float | None = None
        self.limit_hit = False
        self.infra: InfraFailure | None = None
        self.retries = 0

    def normalise(self, line: str, index: int) -> list[AgentEvent]:
        if '"api_retry"' in line or '"is_error":true' in line or '"is_error": true' in line:
            self.watch(line)
        return normalise_line(line, index)

    def watch(self, line: str) -> None:
        """Read an API retry or an error result live: a bad key ends the agent at once, the
        3rd retry of an unavailable API ends it too."""
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            return
        failure = infra_failure(obj) if isinstance(obj, dict) else None
        if failure is None:
            return
        self.infra = failure
        if obj.get("type") != "system":
            return
        self.retries += failure.kind is InfraKind.UNAVAILABLE
        if failure.kind is InfraKind.AUTH or self.retries >= UNAVAILABLE_RETRIES:
            self.halt = f"infrastructure: {failure.message}"

    def fold(self, event: AgentEvent) -> None:
        if event.kind is EventKind.SESSION and event.session_id:
            self.session_id = event.session_id
        elif event.kind is EventKind.TEXT and event.text:
            self.texts.append(event.text)
        elif event.kind is EventKind.USAGE:
            self.input_tokens = max(self.input_tokens, event.input_tokens or 0)
            self.output_tokens += event.output_tokens or 0
            self.turns += 1
        elif event.kind is EventKind.RATE_LIMIT and event.status == "rejected":
            self.limit_hit = True
            self.limit_until = event.resets_at
        elif event.kind is EventKind.RESULT:
            self.final = event

    def result(self, exit_code: int | None) -> AgentResult:
        final = self.final
        result = AgentResult(exit_code=exit_code, events=self.events)
        result.input_tokens = self.input_tokens
        result.output_tokens = self.output_tokens
        result.num_turns = self.turns
        if final is not None:
            # The result's text is the agent's final word; fall back to the last assistant text
            # (a known bug leaves `result` empty: anthropics/claude-code#38673).
            result.final_text = final.text or (self.texts[-1] if self.texts else "")
            result.is_error = final.is_error
            result.subtype = final.subtype
            result.cost_usd = final.cost_usd or 0.0
            result.num_turns = final.num_turns or self.turns
            if final.output_tokens:
                result.output_tokens = final.output_tokens
            if final.is_error and USAGE_LIMIT_TEXT.search(final.text or ""):
                self.limit_hit = True
        else:
            result.final_text = "\n".join(self.texts)
            result.is_error = True
            result.subtype = "no_result"
        # Never record a session id from an is_error result: it may name no session.
        if not result.is_error:
            result.session_id = (final.session_id if final else None) or self.session_id
        result.usage_limit_hit = self.limit_hit
        result.rate_limited_until = self.limit_until
        return result


def _plain_text(stdout: str) -> str:
    """Lines of stdout that are not JSON (the CLI prints some errors as plain text), cut at
    line feeds only: a raw U+2028 in a JSON line's string does not make its rest plain text."""
    return "\n".join(line for line in lines_of(stdout)[-50:] if not line.startswith("{"))
