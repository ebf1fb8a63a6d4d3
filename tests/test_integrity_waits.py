"""One validation boundary for wait states: a year-9999 date, an unknown `resumeWhen` and an
unparsable `time:` are rejected when the wait is written from the STATUS block and again when
a file is read; no such file stops `run`, `status` or `waits list`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from worker.waits.validate import check_time_has_moment, parse_resume_when

from .conftest import FakeAgent, run_worker, write_message

pytestmark = pytest.mark.usefixtures("only_the_task")


def spec_wait(ws: Path, task_id: str, **fields: Any) -> Path:
    """A wait state as the specification's tool writes it (or as a person edits it)."""
    data = {
        "taskId": task_id,
        "timestamp": (datetime.now(UTC) - timedelta(minutes=5)).isoformat(),
        "reason": "r",
        "waitFor": "w",
        "resumeWhen": "user_approval",
        "context": {"mode": "code-simple", "model": "haiku", "iteration": 1},
        **fields,
    }
    folder = ws / "wait_states"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{task_id}.json"
    path.write_text(json.dumps(data))
    return path


BAD_WAITS = {
    "y9999": ({"timestamp": "9999-12-31T23:59:59Z"}, "timestamp"),
    "expires9999": ({"expiresAt": "9999-12-31T00:00:00"}, "expiresAt"),
    "banana": ({"resumeWhen": "banana"}, "resumeWhen"),
    "tomorrow": ({"resumeWhen": "time:tomorrow"}, "resumeWhen"),
    "bare-time": ({"resumeWhen": "time"}, "time"),
}


def test_bad_waits_are_set_aside_naming_the_field_and_every_command_goes_on(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """Year 9999, `banana`, `time:tomorrow` and a `time` with no moment: `status` and
    `waits list` answer (exit 0), the run still does the inbox task, and each file ends in
    `wait_states/rejected/` with a reason naming its field, listed by `worker status`."""
    for task_id, (fields, _) in BAD_WAITS.items():
        spec_wait(workspace, task_id, **fields)
    write_message(workspace, "msg-1")
    env = fake_claude.env()
    for command in (["status"], ["waits", "list"]):
        result = run_worker(workspace, *command, env=env)
        assert result.returncode == 0, result.stderr
        assert "unexpected" not in result.stderr
    result = run_worker(workspace, "run", "--json", env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["task_id"] == "msg-1" and report["outcome"] == "success"
    rejected = workspace / "wait_states" / "rejected"
    for task_id, (_, field) in BAD_WAITS.items():
        assert field in (rejected / f"{task_id}.json.reason.txt").read_text(), task_id
    status = json.loads(run_worker(workspace, "status", "--json", env=env).stdout)
    listed = {Path(item["file"]).name: item["reason"] for item in status["rejected"]}
    assert set(listed) == {f"{task_id}.json" for task_id in BAD_WAITS}
    assert "resumeWhen" in listed["banana.json"] and "9999" in listed["y9999.json"]


@pytest.mark.parametrize(
    ("resume_when", "problem"),
    [("banana", "unknown condition"), ("time:tomorrow", "not an ISO 8601 date")],
)
def test_a_bad_resume_when_in_the_status_block_is_rejected_when_the_wait_is_written(
    workspace: Path, fake_claude: FakeAgent, resume_when: str, problem: str
) -> None:
    """The agent's RESUME_WHEN is not kept as it is: the task waits for a person (who can
    release it), the reason says what was wrong, and WAIT_CONDITION_DEFAULTED marks it."""
    write_message(workspace, "msg-w")
    fake_claude.answers({"status": "wait", "wait_for": "tomorrow", "resume_when": resume_when})
    result = run_worker(workspace, "run", "--json", env=fake_claude.env())
    report = json.loads(result.stdout)
    assert report["outcome"] == "waiting" and "WAIT_CONDITION_DEFAULTED" in report["reason_codes"]
    saved = json.loads((workspace / "wait_states" / "msg-w.json").read_text())
    assert saved["resumeWhen"] == "user_approval" and "resumeAt" not in saved
    assert problem in saved["reason"] and "RESUME_WHEN" in saved["reason"]


def test_a_time_moment_in_the_status_block_is_kept() -> None:
    """The good case stays good: `time:<ISO>` parses to its moment; `time` with `resumeAt`
    passes; a moment in year 9999 does not."""
    kind, moment = parse_resume_when("time:2026-11-27T08:00:00Z")
    assert kind == "time" and moment == datetime(2026, 11, 27, 8, tzinfo=UTC)
    check_time_has_moment("time", datetime(2026, 11, 27, tzinfo=UTC))
    with pytest.raises(ValueError, match="out of range"):
        parse_resume_when("time:9999-01-01T00:00:00")
    with pytest.raises(ValueError, match="needs a moment"):
        check_time_has_moment("time", None)
