"""Records that tell the truth (issue 31): the secrets an agent repeats, masked at the one door
where its words enter worker, found nowhere afterwards."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from worker.cli.app import app
from worker.config import load_settings
from worker.errors import ConfigError
from worker.state.store import Store

from .conftest import FakeAgent, aged, needs_posix, run_worker, write_message

# Values of the kind an agent may read anywhere and repeat: not token-shaped on purpose, so only
# the values themselves (from the environment) can hide them.
SECRETS = {
    "ANTHROPIC_API_KEY": "anthropic-plain-value-0123456789",
    "GITHUB_TOKEN": "github-plain-value-9876543210",
    "WORKER_GITHUB_TOKEN": "worker-gh-plain-value-5555555555",
}


def _cli(ws: Path, *args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--workspace", str(ws)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.output


def _runs(ws: Path) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(_cli(ws, "log", "--json"))["runs"]
    return runs


def _leaks(text: str) -> list[str]:
    return [name for name, value in SECRETS.items() if value in text]


def _files_with_secrets(root: Path) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(value.encode() in data for value in SECRETS.values()):
                found.append(str(path))
    return found


def _planted(state: str, **fields: str) -> dict[str, str]:
    """An answer whose every STATUS field, and its last words, hold all three secrets."""
    words = " ".join(SECRETS.values())
    return {
        "text": f"I read {words} in a file.",
        "status": state,
        "reason": f"because {words}",
        **{key: f"{value} {words}" for key, value in fields.items()},
    }


@pytest.mark.usefixtures("only_the_task")
def test_secrets_the_agent_repeats_reach_no_file_row_or_output(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in agent puts the values of ANTHROPIC_API_KEY, GITHUB_TOKEN and
    WORKER_GITHUB_TOKEN in REASON, WAIT_FOR, RESUME_WHEN and ESCALATE_TO and its last words,
    for a waiting, a failing and a succeeding task: the whole state folder, the workspace and
    the output of every command (text and JSON, `worker run --json` included) hold none."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    fake_claude.answers(
        _planted("wait", wait_for="a reviewer", resume_when="user_approval"),
        _planted("failure", escalate_to="nothing"),
        _planted("success"),
    )
    outputs = []
    for msg_id in ("asks-to-wait", "fails", "succeeds"):
        write_message(workspace, msg_id, priority="high" if msg_id == "asks-to-wait" else "normal")
    for _ in range(3):
        outputs.append(_cli(workspace, "run", "--json"))
    runs = [json.loads(out) for out in outputs]
    assert {run["outcome"] for run in runs} >= {"waiting", "success"}, runs
    assert all("because" in run["reason"] for run in runs if run["outcome"] != "failure")
    for args in (
        ("status",), ("status", "--json"), ("queue",), ("queue", "--json"), ("log",),
        ("log", "--json"), ("why",), ("why", "--json"), ("why", "1"), ("why", "1", "--json"),
        ("show",), ("show", "--json"), ("costs",), ("costs", "--json"), ("waits", "list"),
        ("waits", "list", "--json"), ("waits", "show", "asks-to-wait"),
        ("waits", "show", "asks-to-wait", "--json"), ("doctor",),
    ):  # fmt: skip
        outputs.append(_cli(workspace, *args))
    assert any("a reviewer" in out for out in outputs)  # the wait was shown, less its secrets
    leaks = [(i, _leaks(out)) for i, out in enumerate(outputs) if _leaks(out)]
    assert leaks == []
    state = load_settings(workspace).state
    assert _files_with_secrets(state) == []
    assert _files_with_secrets(workspace) == []


def _dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                           capture_output=True, text=True)  # fmt: skip
    return int(child.stdout)


def _claude_log(path: Path, text: str, cost: float) -> None:
    """An iteration's output log as Claude Code's stream-json leaves it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        {"type": "system", "subtype": "init", "session_id": "s-dead", "model": "m"},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": text}]},
         "session_id": "s-dead"},
        {"type": "result", "subtype": "success", "is_error": False, "result": text,
         "total_cost_usd": cost, "num_turns": 1, "session_id": "s-dead",
         "usage": {"input_tokens": 10, "output_tokens": 5}},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_a_run_killed_mid_task_is_closed_as_died_and_its_paid_call_counted(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """A run killed after its agent answered but before the iteration was recorded: `log`
    says `died` at once (not `running`, as `status` shows nothing running), and the next run
    closes the record (when and by which run it was noticed) and counts the call's cost,
    read back from the iteration's output log, in `costs`."""
    settings = load_settings(workspace)
    settings.state.mkdir(parents=True, exist_ok=True)
    with Store(settings.db_path) as store:
        dead = store.start_run(settings.machine_id, _dead_pid())
        store.record_decision(
            dead, machine_id=settings.machine_id, task_id="t-dead", source="inbox",
            mode="code-simple", reason_codes=["NEW_TASK"], candidates={}, latency_ms=1.0,
        )  # fmt: skip
    _claude_log(
        settings.logs / f"run-{dead}" / "iteration-1.jsonl",
        "done\n=== AGENT STATUS ===\nSTATUS: success\nREASON: all good\n===================",
        0.42,
    )
    (before,) = [r for r in _runs(workspace) if r["run"] == dead]
    assert before["outcome"] == "died" and "gone" in before["reason"]
    assert json.loads(_cli(workspace, "run", "--json"))["outcome"] == "idle"
    (after,) = [r for r in _runs(workspace) if r["run"] == dead]
    assert after["outcome"] == "died" and after["task"] == "t-dead"
    assert "RUN_DIED" in after["outcome_codes"]
    assert f"was gone when run {dead + 1} looked at" in after["reason"]
    assert after["cost_usd"] == pytest.approx(0.42) and after["iterations"] == 1
    costs = json.loads(_cli(workspace, "costs", "--json"))
    assert sum(row["usd"] for row in costs["tasks"]) == pytest.approx(0.42)
    with Store(settings.db_path) as store:
        (still_open,) = store.db.execute("SELECT COUNT(*) FROM runs WHERE ended_at IS NULL")
    assert still_open[0] == 0


_DIE_AFTER_REPORT = """
import os, sys
import worker.run.tasks as tasks
from worker.config import load_settings
from worker.state.store import Store
from worker.run.runner import run_once
report = tasks._report
def report_then_die(*args, **kwargs):
    report(*args, **kwargs)
    os._exit(137)  # killed after the reply and the move to done/, before the run's record
tasks._report = report_then_die
from pathlib import Path
run_once(load_settings(Path(sys.argv[1])))
"""


def test_a_task_completed_by_a_run_killed_before_its_record_is_on_record_as_success(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """The run dies right after it replied and moved the message to `done/`: the next run
    closes its record as the task's success (RUN_DIED_AFTER_RESULT), with its cost, so that
    `worker log` and `worker costs` agree with the inbox."""
    fake_claude.answers({"status": "success", "reason": "all done", "cost": 0.25})
    write_message(workspace, "finished")
    died = subprocess.run(
        [sys.executable, "-c", _DIE_AFTER_REPORT, str(workspace)], check=False, timeout=120
    )
    assert died.returncode == 137
    assert (workspace / "inbox" / "done" / "finished.json").exists()
    assert json.loads(_cli(workspace, "run", "--json"))["outcome"] == "idle"
    rows = [r for r in _runs(workspace) if r["task"] == "finished"]
    assert [r["outcome"] for r in rows] == ["success"]
    assert "RUN_DIED_AFTER_RESULT" in rows[0]["outcome_codes"]
    assert rows[0]["cost_usd"] == pytest.approx(0.25)
    costs = json.loads(_cli(workspace, "costs", "--json"))
    assert sum(row["usd"] for row in costs["tasks"]) == pytest.approx(0.25)


@pytest.mark.usefixtures("only_the_task")
@pytest.mark.parametrize("action", ["cancle", "explode", None, ""])
def test_a_control_message_with_a_bad_action_is_set_aside_not_run(
    workspace: Path, fake_claude: FakeAgent, action: str | None
) -> None:
    """`"kind": "control"` with an action worker does not know (a typo, nonsense, none):
    moved to `rejected/` with its reason (the action named, the valid ones listed), its
    sender told so, and no agent paid to work on it."""
    write_message(workspace, "queued", subject="the real task")
    fields = {"kind": "control", "task": "queued", "subject": "cancel order"}
    if action is not None:
        fields["action"] = action
    write_message(workspace, "order", **fields)
    forced = CliRunner().invoke(app, ["run", "--task-id", "order", "--workspace", str(workspace)])
    assert "no such task" in str(forced.exception)  # a usage error (exit 2), not a task
    assert fake_claude.task_calls == []
    rejected = workspace / "inbox" / "rejected"
    reason = (rejected / "order.json.reason.txt").read_text()
    assert "stop, cancel, pause, resume" in reason
    assert (repr(action) if action else "without an action") in reason
    reply = json.loads((workspace / "inbox" / "outbox" / "order-rejected-reply.json").read_text())
    assert reply["to"] == "alice" and "set aside" in reply["body"] and "cancel" in reply["body"]
    # The next run takes the real task, never the order.
    json.loads(_cli(workspace, "run", "--json"))
    assert [call["stdin"].count("the real task") > 0 for call in fake_claude.task_calls] == [True]


# -- settings checked before any agent is paid ------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "key", "words"),
    [
        ("task_wall_clock_s = 1e999", "task_wall_clock_s", "finite"),
        ("iteration_timeout_s = inf", "iteration_timeout_s", "finite"),
        ("task_wall_clock_s = 1e300", "task_wall_clock_s", "at most"),
        ("task_cost_cap_usd = 1e12", "task_cost_cap_usd", "at most"),
        ("[fallback]\ninterval_hours = nan", "fallback.interval_hours", "finite"),
        ("[daemon]\ninterval_s = inf", "daemon.interval_s", "finite"),
        ("[waits]\nexpiry_days = 1e999", "waits.expiry_days", "finite"),
        ('machine_id = "box\\nother"', "machine_id", "control characters"),
        ('machine_id = "box\\u2028"', "machine_id", "control characters"),
    ],
)
def test_a_setting_out_of_its_range_is_refused_naming_the_key(
    workspace: Path, toml: str, key: str, words: str
) -> None:
    (workspace / "worker.toml").write_text(toml + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"{re.escape(key)}: .*{words}"):
        load_settings(workspace, env={})  # not the tests' WORKER_MACHINE_ID


@pytest.mark.parametrize(
    ("env", "key"),
    [
        ({"WORKER_TASK_WALL_CLOCK_S": "1e999"}, "task_wall_clock_s"),
        ({"WORKER_LEASE_SECONDS": "1" + "0" * 40}, "lease_seconds"),
        ({"WORKER_MACHINE_ID": "a\tb"}, "machine_id"),
        ({"WORKER_STATE_DIR": "/tmp/a\0b"}, "state_dir"),
        ({"WORKER_WAIT_STATES_DIR": "w\0"}, "wait_states_dir"),
    ],
)
def test_a_bad_value_from_the_environment_is_refused_naming_the_key(
    workspace: Path, env: dict[str, str], key: str
) -> None:
    with pytest.raises(ConfigError, match=rf"{key}: "):
        load_settings(workspace, env=env)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("state_dir", "a-file"),
        ("state_dir", "a-file/below"),
        ("wait_states_dir", "a-file"),
        ("inbox_dir", "a-file"),
    ],
)
def test_a_folder_setting_that_is_a_file_is_refused_before_any_agent_runs(
    workspace: Path,
    fake_claude: FakeAgent,
    monkeypatch: pytest.MonkeyPatch,
    key: str,
    value: str,
) -> None:
    """A path that must be a folder but is a file (or lies under one), from worker.toml or
    the environment: `run` exits 78 naming the key; the commands that report (`status`,
    `log`) name it in a warning and report on the default (they never lock a person out);
    no agent is called."""
    outside = workspace.parent / "outside"
    outside.mkdir()
    (outside / "a-file").write_text("not a folder")
    write_message(workspace, "task")
    env_name = "WORKER_INBOX" if key == "inbox_dir" else "WORKER_" + key.upper()
    monkeypatch.delenv("WORKER_WAIT_STATES_DIR")  # the suite's own would win over worker.toml
    if key != "inbox_dir":  # the tests' WORKER_INBOX would win over worker.toml
        (workspace / "worker.toml").write_text(f'{key} = "{(outside / value).as_posix()}"\n')
        for args in (("run",), ("status",), ("log",)):
            done = run_worker(workspace, *args)
            assert done.returncode == (78 if args == ("run",) else 0), (args, done.stderr)
            assert f"{key}: " in done.stderr and "Traceback" not in done.stderr
        (workspace / "worker.toml").unlink()
    for args in (("run",), ("status",)):
        done = run_worker(workspace, *args, env={env_name: str(outside / value)})
        assert done.returncode == (78 if args == ("run",) else 0), (args, done.stderr)
        assert f"{key}: " in done.stderr and "Traceback" not in done.stderr
    assert fake_claude.task_calls == []


def test_a_folder_that_cannot_be_made_is_refused_naming_its_key(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make_folders` before the run: a wait-state folder that cannot be made (under /proc,
    where nobody, root included, makes folders) is exit 78 naming `wait_states_dir`, before
    the agent is paid."""
    if not Path("/proc/self").is_dir():
        pytest.skip("needs Linux's /proc")
    monkeypatch.delenv("WORKER_WAIT_STATES_DIR")  # the suite's own, which would win
    (workspace / "worker.toml").write_text('wait_states_dir = "/proc/worker-no-such/w"\n')
    write_message(workspace, "task")
    done = run_worker(workspace, "run")
    assert done.returncode == 78, done.stderr
    assert "wait_states_dir: cannot make the folder" in done.stderr
    assert fake_claude.task_calls == []


@pytest.mark.usefixtures("only_the_task")
def test_a_wait_that_cannot_be_saved_keeps_the_result_and_says_what_failed(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent asks to wait and the wait state cannot be written (the disk full): the task
    ends as a failure that says so (not `error`, not a claim kept for the next run to pay the
    agent again)."""
    import worker.waits.record

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(worker.waits.record, "atomic_write_text", full)
    fake_claude.answers({"status": "wait", "reason": "need a human", "wait_for": "approval",
                         "resume_when": "user_approval"})  # fmt: skip
    write_message(workspace, "wants-wait")
    report = json.loads(_cli(workspace, "run", "--json"))
    assert report["outcome"] == "failure" and "WAIT_NOT_SAVED" in report["reason_codes"]
    assert "No space left on device" in report["reason"]
    assert (workspace / "inbox" / "done" / "wants-wait.json").exists()
    assert json.loads(_cli(workspace, "run", "--json"))["outcome"] == "idle"
    assert len(fake_claude.task_calls) == 1


def test_a_modes_file_nested_too_deep_is_refused_naming_it(workspace: Path) -> None:
    (workspace / "modes").mkdir()
    path = workspace / "modes" / "modes.json"
    path.write_text('{"modes": ' + "[" * 100_000 + "]" * 100_000 + "}")
    done = run_worker(workspace, "run")
    assert done.returncode == 78 and str(path) in done.stderr and "nested too deep" in done.stderr


def test_a_mode_id_with_a_control_character_is_refused_naming_the_file(workspace: Path) -> None:
    (workspace / "modes").mkdir()
    path = workspace / "modes" / "modes.json"
    mode = {"id": "quick\nrm -rf", "model": "haiku", "maxIterations": 1, "default": True}
    path.write_text(json.dumps({"modes": [mode]}))
    done = run_worker(workspace, "run")
    assert done.returncode == 78 and str(path) in done.stderr
    assert "control characters" in done.stderr


@pytest.mark.parametrize("value", [42, -1, True, "superurgent", 3.5])
def test_a_message_with_an_unknown_priority_is_set_aside_with_the_reason(
    workspace: Path, fake_claude: FakeAgent, value: object
) -> None:
    aged(write_message(workspace, "odd-priority", priority=value))  # settled, not being written
    assert json.loads(_cli(workspace, "run", "--json"))["outcome"] == "idle"
    reason = (workspace / "inbox" / "rejected" / "odd-priority.json.reason.txt").read_text()
    assert "no priority" in reason and "urgent" in reason
    assert fake_claude.task_calls == []


# -- odd entries in the inbox ----------------------------------------------------------------


@needs_posix("named pipes and symbolic links")
@pytest.mark.usefixtures("only_the_task")
def test_odd_inbox_entries_are_listed_and_never_block_a_run(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """A named pipe (which would block a read forever), a folder named like a message and a
    link to nothing: `queue` and `status` say what each is, the run takes the real message,
    and the entries stay where they are."""
    inbox = workspace / "inbox"
    write_message(workspace, "real")
    os.mkfifo(inbox / "pipe.json")
    (inbox / "folder.json").mkdir()
    (inbox / "dangling.json").symlink_to(inbox / "gone.json")
    queue = _cli(workspace, "queue")
    status = _cli(workspace, "status")
    status_json = json.loads(_cli(workspace, "status", "--json"))
    for name, what in (
        ("pipe.json", "named pipe"),
        ("folder.json", "a folder"),
        ("dangling.json", "symbolic link to nothing"),
    ):
        assert name in queue and what in queue
        assert f"{name}: not a message file: " in status and what in status
        assert any(o["name"] == name and what in o["what"] for o in status_json["inbox_odd"])
    assert json.loads(_cli(workspace, "run", "--json"))["outcome"] == "success"
    assert json.loads(_cli(workspace, "run", "--json"))["outcome"] == "idle"
    assert (inbox / "done" / "real.json").exists()
    assert (inbox / "pipe.json").exists() and (inbox / "folder.json").is_dir()
    assert (inbox / "dangling.json").is_symlink()


@pytest.mark.usefixtures("only_the_task")
def test_an_unexpected_failure_after_the_agent_ran_keeps_its_work_and_says_what_failed(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """worker fails after the agent was paid (its iteration cannot be recorded): the task
    ends as a failure naming the error (never `error`, never a claim left for the next run to
    pay the agent again), and the run's record says the same."""
    import worker.run.loop

    def broken(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(worker.run.loop, "record_iteration", broken)
    write_message(workspace, "paid")
    report = json.loads(_cli(workspace, "run", "--json"))
    assert report["outcome"] == "failure" and "WORKER_FAILED_AFTER_AGENT" in report["reason_codes"]
    assert "disk I/O error" in report["reason"]
    assert json.loads(_cli(workspace, "run", "--json"))["outcome"] == "idle"
    assert len(fake_claude.task_calls) == 1
    (row,) = [r for r in _runs(workspace) if r["task"] == "paid"]
    assert row["outcome"] == "failure" and "disk I/O error" in row["reason"]
