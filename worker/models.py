"""Domain types shared by the parts of worker.

A task is a frozen dataclass, and an agent's events a NamedTuple (the cheapest immutable record
to build: a replay makes 100,000 of them); so are the STATUS block and an infrastructure
failure, which compare every field and are never copied with `dataclasses.replace` nor
serialised whole (a NamedTuple class is built with one `eval`, a frozen dataclass with six
`exec`s: `worker.kernel.model` says what that costs every start). The request to an agent and
what an agent call and a task leave behind are in `worker.results`, exported from here too.
Persisted JSON formats are Pydantic models next to the code that owns their files.
"""

# Annotations evaluated as written, not postponed: worker/config.py says why.

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # re-exported (see `__getattr__` below)
    from worker.results import AgentRequest as AgentRequest
    from worker.results import AgentResult as AgentResult
    from worker.results import IterationRecord as IterationRecord
    from worker.results import TaskResult as TaskResult


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


# The reason code of a maintenance task whose checks cannot run (a set-up problem: no agent
# starts, the run exits 78).
SETUP_PROBLEM = "MAINTENANCE_SETUP_PROBLEM"


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


class StatusBlock(NamedTuple):
    """The agent's STATUS block, parsed strictly. `status` is None when there was none."""

    status: str | None
    reason: str = ""
    escalate_to: str | None = None
    wait_for: str | None = None
    resume_when: str | None = None
    reason_code: str | None = None  # NO_STATUS_BLOCK, UNKNOWN_STATUS, ...


# `worker.results` is loaded when one of its types is first asked for here: a run with nothing
# to do never makes one.
_RESULTS = ("AgentRequest", "AgentResult", "IterationRecord", "TaskResult")


def __getattr__(name: str) -> Any:
    if name in _RESULTS:
        from worker import results

        return getattr(results, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_RESULTS])
