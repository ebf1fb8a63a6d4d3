"""The generic adapter: any executable; the prompt on stdin or in a file; plain text out."""

from __future__ import annotations

import tempfile
from pathlib import Path

from worker.agents.base import EventHandler, launch_agent
from worker.models import AgentEvent, AgentRequest, AgentResult, EventKind
from worker.process.boundedio import clip_event

PROMPT_FILE_PLACEHOLDER = "{prompt_file}"
MODEL_PLACEHOLDER = "{model}"


class CommandAdapter:
    """Runs `argv`; `{prompt_file}` in argv gets a file holding the prompt, else stdin does.
    `{model}` is replaced by the mode's model. Each output line is an assistant text event."""

    name = "command"
    resumes = False

    def __init__(self, argv: list[str], cap_bytes: int = 2_000_000) -> None:
        if not argv:
            raise ValueError("the command adapter needs a command")
        self.argv = argv
        self.cap_bytes = cap_bytes

    def command(self, request: AgentRequest, prompt_file: Path | None = None) -> list[str]:
        parts = []
        for part in self.argv:
            part = part.replace(MODEL_PLACEHOLDER, request.model)
            if PROMPT_FILE_PLACEHOLDER in part:
                part = part.replace(PROMPT_FILE_PLACEHOLDER, str(prompt_file or "<prompt file>"))
            parts.append(part)
        return [*parts, *request.extra_args]

    def run(self, request: AgentRequest, on_event: EventHandler | None = None) -> AgentResult:
        uses_file = any(PROMPT_FILE_PLACEHOLDER in part for part in self.argv)
        with tempfile.TemporaryDirectory(prefix="worker-prompt-") as tmp:
            prompt_file = Path(tmp) / "prompt.md"
            if uses_file:
                prompt_file.write_text(request.prompt, encoding="utf-8")
            events: list[AgentEvent] = []

            def feed(line: str) -> str | None:
                event = clip_event(
                    AgentEvent(EventKind.TEXT, len(events), text=line, raw_type="line")
                )
                events.append(event)
                return on_event(event) if on_event is not None else None

            proc = launch_agent(
                request,
                self.command(request, prompt_file),
                stdin_text=None if uses_file else request.prompt,
                on_line=feed,
                cap_bytes=self.cap_bytes,
            )
        return AgentResult(
            exit_code=proc.exit_code,
            final_text=proc.stdout,
            events=events,
            is_error=proc.exit_code != 0,
            timed_out=proc.timed_out,
            stopped=proc.stopped,
            stderr_tail=proc.stderr_tail,
            truncated=proc.truncated,
            not_found=proc.not_found,
        )
