"""Domain types shared by the parts of worker.

Results are dataclasses, and an agent's events a NamedTuple (the cheapest immutable record to
build: a replay makes 100,000 of them); so are the STATUS block and an infrastructure failure,
which compare every field and are never copied with `dataclasses.replace` nor serialised whole:
a NamedTuple class is built with one `eval`, a frozen dataclass with six `exec`s on Python 3.11
(`worker.kernel.model` says what that costs every start). Persisted JSON formats are Pydantic
models next to the code that owns their files.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple


class Outcome(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    WAITING = "waiting"
    IDLE = "idle"
    DRY_RUN = "dry_run"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    STOPPED = "stopped"  # interrupted by a stop request; work kept, task available again


@dataclass(frozen=True)
class Task:
    """One unit of work, whatever its source. `body` is untrusted text: data, never config."""

    id: str
    source: str  # "inbox" | "github" | "fallback" | "wait"
    title: str
    body: str = ""
    mode: str | None = None  # an explicit mode asked for by the task
    sender: str | None = None
    priority: int = 5  # 0 is the most urgent
    created_at: datetime | None = None
    labels: tuple[str, ...] = ()
    ref: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


class EventKind(StrEnum):
    SESSION = "session"  # the agent's session started (carries session_id, model)
    TEXT = "text"  # assistant text
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    USAGE = "usage"
    RATE_LIMIT = "rate_limit"
    RESULT = "result"  # the final result of one agent invocation
    ERROR = "error"  # an error event of the CLI, or a line we could not parse
    OTHER = "other"  # known but irrelevant (hooks, partial deltas, snapshots)


class AgentEvent(NamedTuple):
    """One normalised event of an agent's stream. Fields not meaningful for a kind stay None.

    A NamedTuple rather than a frozen dataclass: built in one `tuple.__new__` instead of one
    `object.__setattr__` per field, three times faster. Copy with `_replace`.
    """

    kind: EventKind
    index: int = 0  # type: ignore[assignment]  # the line number, from 0; hides tuple.index
    session_id: str | None = None
    model: str | None = None
    text: str | None = None
    tool: str | None = None
    tool_id: str | None = None
    args: dict[str, Any] | None = None
    is_error: bool = False
    error: str | None = None
    # usage: input (with cache reads and writes, i.e. the context size) and output tokens
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    num_turns: int | None = None
    subtype: str | None = None
    status: str | None = None  # rate limit status: allowed | rejected
    resets_at: float | None = None  # epoch seconds
    raw_type: str | None = None


@dataclass(frozen=True)
class AgentRequest:
    """What one iteration asks of an agent adapter."""

    prompt: str
    model: str
    cwd: Path
    timeout_s: float
    log_path: Path | None = None
    resume_session: str | None = None
    extra_args: tuple[str, ...] = ()
    max_budget_usd: float | None = None
    # Set by the worker to end the agent at once (a stop order, SIGTERM to `worker serve`).
    stop: threading.Event | None = field(default=None, compare=False)
    # Told the agent's pid (= its process group) once it runs: recorded on the task's claim.
    on_start: Callable[[int], None] | None = field(default=None, compare=False)


class InfraKind(StrEnum):
    """Why an agent invocation failed for reasons outside the task: infrastructure, not work."""

    AUTH = "auth"  # 401/403, "Invalid API key": the operator must fix a key; exit 78
    UNAVAILABLE = "unavailable"  # overloaded (529), 5xx, network: wait and retry later
    USAGE_LIMIT = "usage_limit"  # the plan's limit; a timed wait until it resets
    MISSING_BINARY = "missing_binary"  # not found, not executable, a folder; exit 78
    CLI_CRASH = "cli_crash"  # non-zero exit without a result event


class InfraFailure(NamedTuple):
    """An infrastructure failure read from a CLI's events or its exit.

    `message` names the cause in words, for logs, `worker why`, replies and comments, e.g.
    "Claude Code could not authenticate: Invalid API key · Fix external API key (HTTP 401)".
    `setting` names what the operator should fix (`claude_bin`, `ANTHROPIC_API_KEY`), if known.
    """

    kind: InfraKind
    message: str
    http_status: int | None = None
    setting: str | None = None


@dataclass
class AgentResult:
    """What one agent invocation did, read from its events and its exit."""

    exit_code: int | None
    final_text: str = ""
    events: list[AgentEvent] = field(default_factory=list)
    session_id: str | None = None
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    num_turns: int = 0
    is_error: bool = False
    subtype: str | None = None
    timed_out: bool = False
    stopped: str | None = None  # why the worker stopped the agent early (supervisor, cancel)
    rate_limited_until: float | None = None  # epoch seconds when a usage limit was hit
    usage_limit_hit: bool = False
    session_missing: bool = False  # `--resume` named a session the CLI no longer has
    not_found: bool = False  # the agent executable could not be started
    error: str | None = None  # the CLI's own error message, when it gave one
    stderr_tail: str = ""
    truncated: bool = False
    infra: InfraFailure | None = None  # set when the failure was not the task's


class StatusBlock(NamedTuple):
    """The agent's STATUS block, parsed strictly. `status` is None when there was none."""

    status: str | None
    reason: str = ""
    escalate_to: str | None = None
    wait_for: str | None = None
    resume_when: str | None = None
    reason_code: str | None = None  # NO_STATUS_BLOCK, UNKNOWN_STATUS, ...


@dataclass
class IterationRecord:
    """One iteration of a task: its mode and model, STATUS, cost, tokens and steering."""

    mode: str
    model: str
    iteration: int  # 1-based within its mode
    status: str
    reason: str
    reason_code: str | None
    duration_s: float
    cost_usd: float
    input_tokens: int
    output_tokens: int
    exit_code: int | None
    steering: list[str] = field(default_factory=list)


@dataclass
class TaskResult:
    """The end of one task run: what the reports and the run record say."""

    task: Task
    outcome: Outcome
    reason: str = ""
    reason_codes: list[str] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)
    iterations: list[IterationRecord] = field(default_factory=list)
    duration_s: float = 0.0
    cost_usd: float = 0.0
    session_id: str | None = None
    branch: str | None = None
    wait_state: Path | None = None
    final_text: str = ""
    anomalies: list[str] = field(default_factory=list)
    review_s: float = 0.0  # the reviewers after the task: their time and cost, kept apart
    review_cost_usd: float = 0.0
    infra: InfraFailure | None = None  # the task ended on an infrastructure failure

    @property
    def mode(self) -> str | None:
        return self.modes[-1] if self.modes else None
