"""The Gemini CLI adapter: `gemini -p <instruction> --output-format stream-json`.

    gemini -p "<INSTRUCTION>" --output-format stream-json --model M [--approval-mode X] [extraArgs]

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
"""

from __future__ import annotations

from worker.agents.base import EventCollector, EventHandler, run_streaming, with_process
from worker.agents.gemini_stream import GeminiJoiner
from worker.models import AgentEvent, AgentRequest, AgentResult, EventKind

# Neutral on purpose: the same adapter runs task prompts and reviewers' prompts.
INSTRUCTION = "Follow the instructions above."
_EXIT_SUBTYPES = {1: "error", 42: "input_error", 53: "turn_limit"}


class GeminiAdapter:
    name = "gemini"

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
            *request.extra_args,
        ]

    def run(self, request: AgentRequest, on_event: EventHandler | None = None) -> AgentResult:
        collector = GeminiCollector(on_event)
        proc = run_streaming(request, self.command(request), collector.feed, self.cap_bytes)
        collector.close()
        result = with_process(collector.result(proc.exit_code), proc)
        return result


class GeminiCollector(EventCollector):
    """Folds one Gemini `stream-json` stream into an AgentResult, line by line."""

    def __init__(self, on_event: EventHandler | None = None) -> None:
        super().__init__(on_event)
        self.joiner = GeminiJoiner()
        self.texts: list[str] = []
        self.final: AgentEvent | None = None
        self.error: str | None = None  # the last error event of severity "error"

    def normalise(self, line: str, index: int) -> list[AgentEvent]:
        return self.joiner.feed(line, index)

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
