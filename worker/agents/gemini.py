"""The Gemini CLI adapter: `gemini -p <instruction> --output-format stream-json`.

    gemini -p "<INSTRUCTION>" --output-format stream-json --model M --skip-trust
           [--approval-mode X] [extraArgs]

The prompt goes on stdin. Gemini CLI's `-p` is "Appended to input on stdin (if any)" (its
`--help`), and it builds the input as `stdin + "\\n\\n" + prompt` (packages/cli/src/gemini.tsx),
so the model reads the whole prompt followed by the short INSTRUCTION, and no large argument
is put on the command line. A mode's `permissionMode` becomes `--approval-mode` (`default`,
`auto_edit`, `yolo`); a headless run cannot ask, so with `default` the tools that would need
approval are refused.

Each iteration starts a new session: `--resume` by session id was reported broken in recent
versions (google-gemini/gemini-cli#24808), and the worker's prompt already carries the previous
iteration's output. The session id stays visible in the `init` event of the logs.

The final text is the assistant `message` deltas joined. An error is a `result` with status
`error`, an `error` event of severity `error` (turn limit, empty or malformed model response),
a stream with no `result`, or a non-zero exit: 1 error, 42 input error, 53 turn limit
(Gemini CLI's headless-mode docs). Gemini reports no cost.

The workspace is trusted for the run with `--skip-trust` (Gemini CLI 0.61 sets
`GEMINI_CLI_TRUST_WORKSPACE=true` from it, packages/cli/src/config/config.ts): without it, with
folder trust on, a headless run in a folder never trusted interactively exits 55, and a `yolo`
approval mode is silently lowered to `default`.

Infrastructure failures: Gemini CLI retries an unavailable API (429, 5xx) up to 10 times over
minutes and says so only on stderr ("Attempt 2 failed with status 503. Retrying with
backoff..."), so stderr is watched: the agent is ended at the 3rd retry, or at once on a 401/403.
Exit 41 is its FATAL_AUTHENTICATION_ERROR (no key, or an auth type it cannot use).
"""

from __future__ import annotations

import re

from worker.agents import failures
from worker.agents.base import EventCollector, EventHandler, run_streaming, with_process
from worker.agents.gemini_stream import GeminiJoiner
from worker.models import AgentEvent, AgentRequest, AgentResult, EventKind, InfraFailure, InfraKind
from worker.process.proc import ProcResult

# Neutral on purpose: the same adapter runs task prompts and reviewers' prompts.
INSTRUCTION = "Follow the instructions above."
_EXIT_SUBTYPES = {1: "error", 41: "auth_error", 42: "input_error", 53: "turn_limit"}
_AUTH_EXIT = 41
CLI = "Gemini CLI"
KEY_SETTING = "GEMINI_API_KEY"
_API_MESSAGE = re.compile(r'"message":\s*"((?:\\.|[^"\\])*)"')
_ATTEMPT = re.compile(r"Attempt (\d+) failed(?: with status (\d{3}))?")


class GeminiAdapter:
    name = "gemini"
    resumes = False

    def __init__(self, executable: str = "gemini", cap_bytes: int = 2_000_000) -> None:
        self.executable = executable
        self.cap_bytes = cap_bytes

    def command(self, request: AgentRequest) -> list[str]:
        return [
            self.executable,
            "-p",
            INSTRUCTION,
            "--output-format",
            "stream-json",
            "--model",
            request.model,
            "--skip-trust",
            *request.extra_args,
        ]

    def run(self, request: AgentRequest, on_event: EventHandler | None = None) -> AgentResult:
        collector = GeminiCollector(on_event)
        proc = run_streaming(
            request, self.command(request), collector.feed, self.cap_bytes, collector.watch
        )
        collector.close()
        result = with_process(collector.result(proc.exit_code), proc)
        result.infra = collector.infra_of(result, proc)
        # A quota, daily or per minute, waits like a usage limit: there is no reset time.
        result.usage_limit_hit = result.infra is not None and (
            result.infra.kind is InfraKind.USAGE_LIMIT
        )
        return result


class GeminiCollector(EventCollector):
    """Folds one Gemini `stream-json` stream into an AgentResult, line by line."""

    def __init__(self, on_event: EventHandler | None = None) -> None:
        super().__init__(on_event)
        self.joiner = GeminiJoiner()
        self.texts: list[str] = []
        self.final: AgentEvent | None = None
        self.error: str | None = None  # the last error event of severity "error"
        self.status: int | None = None  # the HTTP status of the last retried model request
        self.api_message: str | None = None  # the model API's last error message on stderr
        self.infra: InfraFailure | None = None  # set when stderr showed an API that fails

    def normalise(self, line: str, index: int) -> list[AgentEvent]:
        return self.joiner.feed(line, index)

    def watch(self, line: str) -> str | None:
        """One stderr line: a retry of the model API ends the agent at the 3rd attempt when the
        API is unavailable, at once when the key is refused. The API's own message comes in
        the error printed after each attempt line."""
        said = _API_MESSAGE.search(line)
        if said:
            self.api_message = said.group(1)
        attempt = _ATTEMPT.search(line)
        if attempt is None:
            return None
        count = int(attempt.group(1))
        self.status = int(attempt.group(2)) if attempt.group(2) else self.status
        # Without an HTTP answer the line itself says why: "Attempt 2 failed. Retrying with
        # backoff... Error: exception TypeError: fetch failed sending request".
        tail = line.split("Error: ", 1)[1].strip() if "Error: " in line else ""
        text = f"{self.api_message or tail or 'the model API failed'} ({count} attempts)"
        infra = failures.classify(CLI, text, status=self.status, key_setting=KEY_SETTING)
        if infra is not None and (
            infra.kind is InfraKind.AUTH or count >= failures.RETRIES_BEFORE_GIVING_UP
        ):
            self.infra = infra
            return f"infrastructure: {infra.message}"
        return None

    def infra_of(self, result: AgentResult, proc: ProcResult) -> InfraFailure | None:
        """What kept the CLI from working, if it was not the task: the retries seen on
        stderr, the error it ended with, exit 41, or a crash (a program that could not start
        at all is the loop's to name)."""
        if self.infra is not None or not result.is_error:
            return self.infra
        if proc.timed_out or proc.stopped or proc.not_found:
            return None
        message = result.error or ""
        found = failures.classify(CLI, message, status=self.status, key_setting=KEY_SETTING)
        if found is None and proc.exit_code == _AUTH_EXIT:
            detail = failures.last_line(proc.stderr_tail) or "no usable authentication"
            found = InfraFailure(
                InfraKind.AUTH, f"{CLI} could not authenticate: {detail}", setting=KEY_SETTING
            )
        if found is None and self.final is None and self.error is None:
            found = failures.crash(CLI, proc.exit_code, proc.stderr_tail)
        return found

    def close(self) -> None:
        """The stream ended: give out the text still being joined (the process is gone, so a
        stop asked for now has nothing left to stop)."""
        self.take(self.joiner.flush())

    def fold(self, event: AgentEvent) -> None:
        if event.kind is EventKind.TEXT and event.text:
            self.texts.append(event.text)
        elif event.kind is EventKind.ERROR and event.raw_type == "error":
            if event.subtype != "warning":
                self.error = event.error or "gemini reported an error"
        elif event.kind is EventKind.RESULT:
            self.final = event

    def result(self, exit_code: int | None) -> AgentResult:
        final = self.final
        if exit_code not in (0, None):
            subtype = _EXIT_SUBTYPES.get(exit_code, f"exit_{exit_code}")
        elif final is None:
            subtype = "no_result"
        elif final.is_error or self.error:
            subtype = "error"
        else:
            subtype = "success"
        message = (final.error if final else None) or self.error
        text = "\n\n".join(self.texts)
        return AgentResult(
            exit_code=exit_code,
            final_text=text or (message or ""),
            events=self.events,
            input_tokens=(final.input_tokens or 0) if final else 0,
            output_tokens=(final.output_tokens or 0) if final else 0,
            is_error=subtype != "success",
            subtype=subtype,
            error=message if subtype != "success" else None,
        )
