"""The Codex adapter: `codex exec --json`, the prompt on stdin (`-`).

    codex exec --json --model M [--skip-git-repo-check] [extraArgs] -
    codex exec --json --model M [--skip-git-repo-check] [extraArgs] resume <thread_id> -

Exec-level flags go before `resume`: a Codex maintainer says they must sit "between `codex exec`
and `resume`" (openai/codex#3817), codex-cli 0.125 rejects `-C`/`-s` after it
(garrytan/gstack#1258), and 0.151 resumes with this exact shape (shep-ai/shep#875). `-` reads
the prompt from stdin in both forms. Codex refuses to run outside a git repository unless told
`--skip-git-repo-check` (Codex's `exec` docs).

The session id is `thread.started.thread_id`; the final text is the last `agent_message` item;
usage comes from `turn.completed`; Codex reports no cost. A mode's `permissionMode` is Codex's
sandbox (`--sandbox`, workspace-write unless the mode says otherwise) with the approval policy
`never`: see worker/modes.py.

Infrastructure failures come from Codex's `error` events. A retried request says
"Reconnecting... 2/5 (unexpected status 503 Service Unavailable: ..., url: ...)": on a 401/403 the
agent is ended at once, on an unavailable API at its 3rd retry; the result carries `infra`.
"""

from __future__ import annotations

import re
from pathlib import Path

from worker.agents import failures
from worker.agents.base import EventCollector, EventHandler, run_streaming, with_process
from worker.agents.codex_stream import codex_line
from worker.models import AgentEvent, AgentRequest, AgentResult, EventKind, InfraFailure, InfraKind
from worker.process.proc import ProcResult

CLI = "Codex"
KEY_SETTING = "OPENAI_API_KEY (or the env_key of Codex's model provider)"
_RETRY = re.compile(r"^Reconnecting\.\.\. (?:(\d+)/\d+)?[^(]*\((.*)\)$", re.S)
_URL = re.compile(r",? url: \S+$")


class CodexAdapter:
    name = "codex"
    resumes = True

    def __init__(self, executable: str = "codex", cap_bytes: int = 2_000_000) -> None:
        self.executable = executable
        self.cap_bytes = cap_bytes

    def command(self, request: AgentRequest) -> list[str]:
        argv = [self.executable, "exec", "--json", "--model", request.model]
        if not _in_git_repository(request.cwd):
            argv.append("--skip-git-repo-check")
        argv += list(request.extra_args)
        if request.resume_session:
            argv += ["resume", request.resume_session]
        argv.append("-")
        return argv

    def run(self, request: AgentRequest, on_event: EventHandler | None = None) -> AgentResult:
        collector = CodexCollector(on_event)
        proc = run_streaming(request, self.command(request), collector.feed, self.cap_bytes)
        result = with_process(collector.result(proc.exit_code), proc)
        if result.infra is None and collector.crashed(proc.exit_code, proc):
            result.infra = failures.crash(CLI, proc.exit_code, proc.stderr_tail)
        if request.resume_session and collector.session_id is None and result.is_error:
            # A resume that never started a thread failed on the id (a lost session, or one of
            # another agent's): the loop then starts fresh, the same iteration.
            result.session_missing = True
        return result


class CodexCollector(EventCollector):
    """Folds one `codex exec --json` stream into an AgentResult, line by line."""

    def __init__(self, on_event: EventHandler | None = None) -> None:
        super().__init__(on_event)
        self.session_id: str | None = None
        self.messages: list[str] = []
        self.input_tokens = 0
        self.output_tokens = 0
        self.turns = 0
        self.completed = False
        self.failed: str | None = None  # the message of a turn.failed
        self.error: str | None = None  # the last top-level error no completed turn followed
        self.infra: InfraFailure | None = None  # what the last error says about the API
        self.retries = 0  # Codex's "Reconnecting..." events so far

    def normalise(self, line: str, index: int) -> list[AgentEvent]:
        return codex_line(line, index)

    def watch(self, message: str) -> None:
        """Read an error event: a bad key ends the agent now, an unavailable API at the CLI's
        3rd retry; anything else is left to Codex's own retries."""
        retry = _RETRY.match(message)
        text = _URL.sub("", retry.group(2) if retry else message)
        self.infra = failures.classify(CLI, text, key_setting=KEY_SETTING)
        if self.infra is None or self.halt:
            return
        if message.startswith("Reconnecting..."):
            # "Reconnecting... 2/5 (...)", or without a count and for ever while the network
            # is down: "Reconnecting... waiting for network (Connection failed: ...)".
            self.retries += 1
        counted = int(retry.group(1)) if retry and retry.group(1) else 0
        attempt = max(counted, self.retries)
        if self.infra.kind is InfraKind.AUTH or (
            self.infra.kind is InfraKind.UNAVAILABLE
            and attempt >= failures.RETRIES_BEFORE_GIVING_UP
        ):
            self.halt = f"infrastructure: {self.infra.message}"

    def crashed(self, exit_code: int | None, proc: ProcResult) -> bool:
        """A non-zero exit with no turn result, no error event, and not ended by the worker (a
        program that could not start at all is the loop's to name)."""
        return (
            exit_code not in (0, None)
            and self.turns == 0
            and self.error is None
            and not (proc.timed_out or proc.stopped)
        )

    def fold(self, event: AgentEvent) -> None:
        if event.kind is EventKind.SESSION and event.session_id:
            self.session_id = event.session_id
        elif event.kind is EventKind.TEXT and event.raw_type == "agent_message":
            self.messages.append(event.text or "")
        elif event.kind is EventKind.ERROR and event.raw_type == "error":
            # Only the top-level event: an `error` item is a warning, and an unparsable line is
            # noise. The retried stream error ("Reconnecting... 1/5") has the same shape; the
            # turn.completed that follows it clears it (openai/codex#32984).
            self.error = event.error or "codex reported an error"
            self.watch(self.error)
        elif event.kind is EventKind.RESULT:
            self.turns += 1
            self.input_tokens += event.input_tokens or 0
            self.output_tokens += event.output_tokens or 0
            if event.is_error:
                self.failed = event.error or self.error or "the turn failed"
                self.watch(self.failed)
            else:
                self.completed, self.error = True, None

    def result(self, exit_code: int | None) -> AgentResult:
        message = self.failed or self.error
        if self.failed:
            subtype = "turn.failed"
        elif self.error:
            subtype = "error"
        elif not self.completed:
            subtype = "no_result"
        elif exit_code not in (0, None):  # None: ended by the worker after the turn completed
            subtype = f"exit_{exit_code}"
        else:
            subtype = "success"
        is_error = subtype != "success"
        result = AgentResult(
            exit_code=exit_code,
            # The last agent message is Codex's final word; a failed run with none says why.
            final_text=self.messages[-1] if self.messages else (message or ""),
            events=self.events,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            num_turns=self.turns,
            is_error=is_error,
            subtype=subtype,
            error=message if is_error else None,
            # As for Claude: a failed run's session is not one to resume.
            session_id=None if is_error else self.session_id,
        )
        if is_error and self.infra is not None:
            result.infra = self.infra
            # "You've hit your usage limit. Upgrade to Pro (...) or try again in 2 days 17 hours
            # 14 minutes." (openai/codex#3124); no reset time to parse: the wait backs off.
            result.usage_limit_hit = self.infra.kind is InfraKind.USAGE_LIMIT
        return result


def _in_git_repository(cwd: Path) -> bool:
    """Whether cwd is inside a git work tree (`.git` is a folder, or a file in a worktree)."""
    path = cwd.resolve()
    return any((folder / ".git").exists() for folder in (path, *path.parents))
