"""The wait-state file: the specification's format plus worker's own fields.

    {"taskId", "timestamp", "reason", "waitFor", "resumeWhen",
     "context": {"mode", "model", "iteration", "outputSnippet"}}

Files written by the specification's own tool load unchanged (our fields all have defaults);
unknown keys are kept. worker writes them, with its record of each, in `worker.waits.record`;
a file counts only as recorded there (`worker waits adopt` records one written elsewhere).
"""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from worker.errors import MalformedInput, describe_validation
from worker.models import Task
from worker.process.platform.names import portable_name
from worker.state.fsutil import is_link, json_files, read_bytes
from worker.waits import validate
from worker.waits.validate import CONDITIONS

__all__ = ["CONDITIONS", "WaitContext", "WaitState", "complete", "load_wait_state"]

SCHEMA_VERSION = 1

# The validation context of a wait read back from worker's record, which passed the current
# rules when it was written (`validate.RULES`): their checks are not run again.
_CHECKED: dict[str, int] = {"rules": validate.RULES}


class WaitContext(BaseModel):
    # Built on first use, not at import (as WaitState): a run with no waits reads none.
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)

    mode: str
    model: str
    iteration: int = Field(ge=0)
    output_snippet: str = Field("", alias="outputSnippet")


class WaitState(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)

    task_id: str = Field(alias="taskId", min_length=1)
    timestamp: datetime
    reason: str = ""
    wait_for: str = Field("", alias="waitFor")
    resume_when: str = Field(alias="resumeWhen")
    context: WaitContext
    # worker's own fields
    schema_version: int = Field(SCHEMA_VERSION, alias="schemaVersion")
    source: str | None = None
    source_ref: dict[str, Any] = Field(default_factory=dict, alias="sourceRef")
    task_title: str = Field("", alias="taskTitle")
    task_body: str = Field("", alias="taskBody")
    task_sender: str | None = Field(None, alias="taskSender")  # who asked (inbox replies go there)
    session_id: str | None = Field(None, alias="sessionId")
    resume_brief: str = Field("", alias="resumeBrief")
    last_active_at: datetime | None = Field(None, alias="lastActiveAt")
    expires_at: datetime | None = Field(None, alias="expiresAt")
    # `[]`, not `default_factory=list` (worker/config.py says why): the first wait read in a
    # run built its validator about 2 ms slower.
    approvers: list[str] = []
    resume_at: datetime | None = Field(None, alias="resumeAt")  # for `time` waits
    modes_used: list[str] = Field([], alias="modesUsed")
    cost_usd: float = Field(0.0, alias="costUsd")

    # The checks of worker.waits.validate, on every write and every read (but that of a
    # record which passed them when written: `from_record`).
    @field_validator("timestamp", "last_active_at", "expires_at", "resume_at")
    @classmethod
    def _in_range(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        if value is None or info.context is _CHECKED:
            return value
        return validate.check_moment(value)

    @field_validator("resume_when")
    @classmethod
    def _known_condition(cls, value: str, info: ValidationInfo) -> str:
        if info.context is not _CHECKED:
            validate.parse_resume_when(value)
        return value

    @model_validator(mode="after")
    def _time_has_moment(self, info: ValidationInfo) -> Self:
        # Only a `time` wait can lack its moment (its condition was checked above).
        if info.context is not _CHECKED and self.resume_at is None and self.condition == "time":
            validate.check_time_has_moment(self.resume_when, self.resume_at)
        return self

    @property
    def since(self) -> datetime:
        """When the wait began (timezone-aware; spec files may omit the zone: UTC)."""
        at = self.timestamp
        return at if at.tzinfo else at.replace(tzinfo=UTC)

    def expiry(self, expiry_days: float) -> datetime:
        at = self.expires_at or self.timestamp + timedelta(days=expiry_days)
        return at if at.tzinfo else at.replace(tzinfo=UTC)

    @property
    def condition(self) -> str:
        """The condition's kind: `time:2026-...` and `time` are both `time`."""
        return self.resume_when.split(":", 1)[0].strip().lower()

    def dump(self) -> str:
        return (
            json.dumps(self.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2)
            + "\n"
        )


def from_record(text: str) -> WaitState:
    """A wait recorded by worker under the current rules (`validate.RULES`), from its record:
    parsed and typed as any other, without running again the checks it passed when written."""
    return WaitState.model_validate_json(text, context=_CHECKED)


def task_of(state: WaitState, inbox: Path | None = None) -> Task:
    """The task a wait state belongs to, rebuilt from its file. An inbox task's sender comes
    from `taskSender`, or else from its message in `<inbox>/done/` (older files)."""
    sender = state.task_sender
    if sender is None and inbox is not None and state.source == "inbox":
        sender = _inbox_sender(inbox, state)
    return Task(
        id=state.task_id,
        source=state.source or "wait",
        title=state.task_title or state.task_id,
        body=state.task_body,
        mode=state.context.mode,
        sender=sender,
        ref=dict(state.source_ref),
    )


def _inbox_sender(inbox: Path, state: WaitState) -> str | None:
    name = Path(str(state.source_ref.get("file") or f"{state.task_id}.json")).name
    # done/ is kept by id; elsewhere the file has the name it came with.
    candidates = [inbox / "done" / file_name(state.task_id), inbox / "claimed" / name, inbox / name]
    for path in candidates:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        sender = data.get("from") if isinstance(data, dict) else None
        if isinstance(sender, str) and sender:
            return sender
    return None


def file_name(task_id: str) -> str:
    """A safe file name for the task's wait state, one per task id: when characters had to be
    replaced (`owner/name#12`), a short hash of the id keeps `a/b` and `a_b` apart."""
    return portable_name(task_id) + ".json"  # valid on Windows too: no `CON`, no `:`


def complete(state: WaitState, expiry_days: float = 7.0) -> str:
    """Fill worker's own fields that are still empty; return the validated text to write."""
    now = datetime.now(UTC)
    if state.last_active_at is None:
        state.last_active_at = now
    if state.expires_at is None:
        state.expires_at = state.timestamp + timedelta(days=expiry_days)
    if not state.resume_brief:
        state.resume_brief = (
            f"{state.context.mode} iteration {state.context.iteration} of {state.task_id}: "
            f"waiting for {state.wait_for or state.resume_when}"
        )[:300]
    text = state.dump()
    WaitState.model_validate(json.loads(text))  # validate what we write
    return text


def load_wait_state(path: Path) -> WaitState:
    try:
        return WaitState.model_validate_json(read_bytes(path))  # a link is not read through
    except OSError as exc:
        raise MalformedInput(f"{path.name}: cannot read: {exc.strerror}") from exc
    except ValidationError as exc:
        problems = describe_validation(exc, root="file")
        raise MalformedInput(f"{path.name}: not a wait state: {problems}") from exc


def wait_state_files(folder: Path) -> list[Path]:
    """The wait-state files of `folder`; none when the folder is a link (where the agent could
    point it, with the folder in the tree: it is not followed)."""
    return [] if is_link(folder, "read wait states") else json_files(folder)
