"""Helpers of the supervision tests (this module holds no tests).

`Stream` builds normalised AgentEvents the way the Claude adapter emits them (an assistant
turn's tool call and usage, then the user's tool result), so that a test reads as a story:
`s.tool("Bash", {"command": "make"}, error="boom")`. `claude_lines` turns the same story into
real Claude stream-json lines, for the transcripts in tests/fixtures/transcripts_supervision/.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worker.models import AgentEvent, AgentResult, EventKind, StatusBlock, Task
from worker.supervision.protocol import IterationView
from worker.supervision.settings import SupervisionSettings
from worker.supervision.supervisor import Supervisor

TASK = Task(id="task-1", source="inbox", title="Fix the parser")
WRITTEN = Path(__file__).parent / "fixtures" / "transcripts_supervision"
RECORDED = Path(__file__).parent / "fixtures" / "transcripts"


@dataclass
class Stream:
    """A story of agent events; `index` counts stream lines like a real transcript."""

    events: list[AgentEvent] = field(default_factory=list)
    index: int = 0

    def _add(self, *events: AgentEvent) -> Stream:
        self.events.extend(events)
        self.index += 1
        return self

    def session(self, model: str = "claude-sonnet-4-5") -> Stream:
        return self._add(AgentEvent(EventKind.SESSION, self.index, session_id="s", model=model))

    def tool(
        self,
        name: str,
        args: dict[str, Any] | None = None,
        error: str | None = None,
        output: str = "ok",
    ) -> Stream:
        tool_id = "toolu_" + uuid.uuid4().hex[:20]
        self._add(
            AgentEvent(
                EventKind.TOOL_CALL, self.index, tool=name, tool_id=tool_id, args=args or {}
            ),
            AgentEvent(EventKind.USAGE, self.index, input_tokens=1000),
        )
        return self._add(
            AgentEvent(
                EventKind.TOOL_RESULT,
                self.index,
                tool_id=tool_id,
                is_error=error is not None,
                error=error,
                text=error or output,
            )
        )

    def say(self, text: str) -> Stream:
        return self._add(AgentEvent(EventKind.TEXT, self.index, text=text))

    def usage(self, tokens: int, model: str | None = None) -> Stream:
        return self._add(AgentEvent(EventKind.USAGE, self.index, input_tokens=tokens, model=model))


def settings(**values: Any) -> SupervisionSettings:
    return SupervisionSettings.model_validate(values)


def supervisor(tmp_path: Path | None = None, **values: Any) -> Supervisor:
    """A live supervisor; reports go to `tmp_path/reports` when a tmp_path is given."""
    return Supervisor(
        settings(**values),
        TASK,
        7,
        machine_id="test-machine",
        reports_dir=tmp_path / "reports" if tmp_path is not None else None,
    )


def view(
    iteration: int = 1,
    *,
    changed: tuple[str, ...] = (),
    escalations: int = 0,
    status: str | None = "continue",
    reason: str = "still working",
    model: str = "sonnet",
    mode: str = "code-simple",
    result: AgentResult | None = None,
) -> IterationView:
    return IterationView(
        task=TASK,
        mode=mode,
        model=model,
        iteration=iteration,
        max_iterations=5,
        escalations=escalations,
        result=result or AgentResult(exit_code=0),
        status=StatusBlock(status, reason),
        changed_files=list(changed),
        cost_so_far=0.05,
    )


def feed(sup: Supervisor, stream: Stream) -> str | None:
    """Every event of the stream through on_event; the first stop reason, if any."""
    stop = None
    for event in stream.events:
        reason = sup.on_event(event)
        stop = stop or reason
    return stop


def described_as_plain(settings: SupervisionSettings, calls: list[Any]) -> None:
    """Each call, observed twice (the second time from the detectors' memo), is described as
    the plain functions describe it: `canonical_args` and `shell_writes`."""
    from worker.supervision.detectors import StreamDetectors
    from worker.supervision.progress import shell_writes
    from worker.supervision.signals import call_target, canonical_args, echoed_values, waits

    detectors = StreamDetectors(settings)
    volatile = frozenset(settings.volatile_keys)
    for turn in range(2):
        for n, (tool, args) in enumerate(calls):
            tool_id = f"t{turn}-{n}"
            detectors.observe(
                AgentEvent(EventKind.TOOL_CALL, n, tool=tool, tool_id=tool_id, args=args)
            )
            plain = canonical_args(args, volatile)
            writes = tool == "Edit" or shell_writes(args)
            described = detectors._calls[tool_id][0]
            assert described[:4] == (tool, plain, f"{tool} {plain}", writes)
            kept = {k: v for k, v in (args or {}).items() if k not in volatile}
            assert described[4][:3] == (*call_target(kept), waits(kept))
            assert detectors._echoed(described[4]) == echoed_values(kept)


def sentences(message: str) -> int:
    """Sentences of a steering line, evidence in backticks left out (it is data)."""
    prose = re.sub(r"`[^`]*`", "X", message)
    return len([part for part in re.split(r"(?<=[.!?])\s+", prose.strip()) if part])


# -- Claude stream-json transcripts ---------------------------------------------------------


def claude_lines(
    steps: list[tuple[str, Any]],
    model: str = "claude-sonnet-4-5-20250929",
    session_model: str | None = None,
) -> list[str]:
    """Real Claude stream-json for a story: ("tool", (name, args, error)), ("say", text),
    ("context", tokens). Ends with a `result` line."""
    session = str(uuid.uuid4())
    lines = [
        _line(
            {
                "type": "system",
                "subtype": "init",
                "session_id": session,
                "model": session_model or model,
                "tools": ["Bash", "Read", "Edit"],
                "cwd": "/work/project",
                "permissionMode": "default",
            }
        )
    ]
    tokens = 12_000
    for kind, value in steps:
        if kind == "context":
            tokens = value
        elif kind == "say":
            lines.append(_assistant([{"type": "text", "text": value}], model, session, tokens))
        elif kind == "tool":
            name, args, error = value
            tool_id = "toolu_" + uuid.uuid4().hex[:24]
            lines.append(
                _assistant(
                    [{"type": "tool_use", "id": tool_id, "name": name, "input": args}],
                    model,
                    session,
                    tokens,
                )
            )
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": tool_id,
                "content": error or "ok",
            }
            if error:
                block["is_error"] = True
            lines.append(
                _line(
                    {
                        "type": "user",
                        "session_id": session,
                        "message": {"role": "user", "content": [block]},
                    }
                )
            )
            tokens += 400
    lines.append(
        _line(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "num_turns": len(steps),
                "result": "done",
                "session_id": session,
                "total_cost_usd": 0.5,
                "usage": {"input_tokens": 3, "output_tokens": 9},
            }
        )
    )
    return lines


def _assistant(content: list[dict[str, Any]], model: str, session: str, tokens: int) -> str:
    return _line(
        {
            "type": "assistant",
            "session_id": session,
            "message": {
                "model": model,
                "id": "msg_" + uuid.uuid4().hex[:24],
                "type": "message",
                "role": "assistant",
                "content": content,
                "stop_reason": None,
                "usage": {
                    "input_tokens": 3,
                    "cache_creation_input_tokens": 200,
                    "cache_read_input_tokens": tokens - 203,
                    "output_tokens": 40,
                },
            },
        }
    )


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False)
