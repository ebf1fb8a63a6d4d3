"""The real `worker` command: exit codes, dry run, JSON, locks, leases and concurrency."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from worker.process.platform.process import end_group

from .conftest import FakeAgent, needs_posix, run_worker, write_message


@pytest.fixture(autouse=True)
def _no_reviewers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")


def tree(ws: Path) -> dict[str, bytes]:
    return {str(p.relative_to(ws)): p.read_bytes() for p in sorted(ws.rglob("*")) if p.is_file()}


def test_help_lists_the_commands() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "worker", "--help"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0
    for command in ("run", "modes", "log"):
        assert command in proc.stdout


def test_dry_run_changes_nothing_at_all(workspace: Path, fake_claude: FakeAgent) -> None:
    write_message(workspace, "msg-1", subject="Fix the bug")
    (workspace / "inbox" / "broken.json").write_text("{nope")
    before = tree(workspace)
    proc = run_worker(workspace, "run", "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["outcome"] == "dry_run" and data["task_id"] == "msg-1"
    assert data["command"][:3] == [str(fake_claude.path), "-p", "--output-format"]
    assert data["mode"] == "code-simple" and data["reason_codes"][0] == "INBOX_TASK_SELECTED"
    assert tree(workspace) == before  # no claim, no file, no row, no quarantine
    assert fake_claude.calls == []


def test_dry_run_text_shows_the_command_line(workspace: Path, fake_claude: FakeAgent) -> None:
    write_message(workspace, "msg-1")
    proc = run_worker(workspace, "run", "--dry-run", "--model", "sonnet")
    assert proc.returncode == 0
    assert "would take msg-1 from inbox" in proc.stdout
    assert "--model sonnet" in proc.stdout


def test_json_output_of_a_run(workspace: Path, fake_claude: FakeAgent) -> None:
    write_message(workspace, "msg-2")
    proc = run_worker(workspace, "run", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    for key in ("outcome", "task_id", "source", "mode", "modes", "iterations", "reason_codes"):
        assert key in data
    assert (data["outcome"], data["mode"], data["iterations"]) == ("success", "code-simple", 1)


def test_failed_task_exits_1(workspace: Path, fake_claude: FakeAgent) -> None:
    fake_claude.answers({"status": "failure", "reason": "no"})
    write_message(workspace, "msg-3")
    proc = run_worker(workspace, "run")
    assert proc.returncode == 1
    assert "failure: msg-3" in proc.stdout


def test_bad_configuration_names_the_key_and_exits_78(workspace: Path) -> None:
    (workspace / "worker.toml").write_text('lease_seconds = "soon"\nunknown_key = 1\n')
    proc = run_worker(workspace, "run")
    assert proc.returncode == 78
    assert "lease_seconds" in proc.stderr and "unknown_key" in proc.stderr
    assert proc.stdout == ""


def test_bad_modes_file_exits_78(workspace: Path) -> None:
    (workspace / "modes").mkdir()
    (workspace / "modes" / "modes.json").write_text(
        json.dumps(
            {
                "modes": [
                    {
                        "id": "a",
                        "model": "m",
                        "maxIterations": 1,
                        "escalation": {"triggerMode": "zz"},
                    }
                ]
            }
        )
    )
    proc = run_worker(workspace, "modes", "validate")
    assert proc.returncode == 78 and "zz" in proc.stderr
    assert run_worker(workspace, "run", "--dry-run").returncode == 78


def test_unknown_mode_option_exits_2_naming_the_known_modes(workspace: Path) -> None:
    """A bad option is a usage error (exit 2, as the README's exit codes say), not 78."""
    for argv in (["--dry-run"], []):
        proc = run_worker(workspace, "run", "--mode", "nope", *argv)
        assert proc.returncode == 2, proc.stderr
        assert "--mode 'nope': unknown mode (known: sync-simple, sync-complex, code-simple, " in (
            proc.stderr
        )


def test_usage_error_exits_2(workspace: Path) -> None:
    assert run_worker(workspace, "run", "--no-such-option").returncode == 2


def test_modes_list_and_validate(workspace: Path) -> None:
    proc = run_worker(workspace, "modes", "list", "--json")
    data = json.loads(proc.stdout)
    assert data["source"] == "embedded defaults"
    assert [m["id"] for m in data["modes"]] == [
        "sync-simple",
        "sync-complex",
        "code-simple",
        "code-complex",
    ]
    assert run_worker(workspace, "modes", "validate").stdout.startswith("ok: 4 modes")


def test_log_lists_decisions_and_runs(workspace: Path, fake_claude: FakeAgent) -> None:
    write_message(workspace, "msg-4")
    run_worker(workspace, "run")
    run_worker(workspace, "run")
    data = json.loads(run_worker(workspace, "log", "--json").stdout)
    assert [r["outcome"] for r in data["runs"]] == ["idle", "success"]
    assert data["decisions"][1]["reason_codes"][0] == "INBOX_TASK_SELECTED"
    text = run_worker(workspace, "log").stdout
    assert "msg-4" in text and "NOTHING_TO_DO" in text


def _start(ws: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "worker", "run", "--json", "--workspace", str(ws)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _wait_for(predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(600):
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def test_second_run_on_a_locked_workspace_exits_75(workspace: Path, fake_claude: FakeAgent) -> None:
    fake_claude.answers({"hang": 30, "status": "success"})
    write_message(workspace, "msg-5")
    first = _start(workspace)
    try:
        _wait_for(lambda: fake_claude.calls, "the agent started")
        second = run_worker(workspace, "run")
        assert second.returncode == 75
        assert "another worker run holds the lock" in second.stderr
    finally:
        first.kill()
        first.communicate()
        for call in fake_claude.calls:
            end_group(call["pid"], grace_s=0)


def _exists(pid: int) -> bool:
    return psutil.pid_exists(pid)  # never os.kill(pid, 0): it terminates on Windows


def test_killed_worker_task_is_taken_again_by_the_next_run(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """A worker killed with SIGKILL leaves its claim behind (no cleanup at all). The next run
    sees that the run holding it is gone, ends its lease and takes the task again at once
    (LEASE_EXPIRED), not when the hour's lease would have run out."""
    fake_claude.answers({"hang": 60, "status": "success"}, {"status": "success"})
    write_message(workspace, "msg-6")
    first = _start(workspace, {"WORKER_LEASE_SECONDS": "3600"})
    _wait_for(lambda: fake_claude.calls, "the agent started")
    first.kill()  # SIGKILL: no cleanup at all
    first.communicate()
    end_group(fake_claude.calls[0]["pid"], grace_s=0)
    assert (workspace / "inbox" / "claimed" / "msg-6.json").exists()
    data = json.loads(run_worker(workspace, "run", "--json").stdout)
    assert (data["outcome"], data["task_id"]) == ("success", "msg-6")
    assert "LEASE_EXPIRED" in data["reason_codes"]
    assert (workspace / "inbox" / "done" / "msg-6.json").exists()


def test_two_concurrent_runs_on_one_inbox_never_run_the_same_message(
    tmp_path: Path, fake_claude: FakeAgent
) -> None:
    fake_claude.answers({"hang": 0.3, "status": "success"})
    inbox = tmp_path / "shared-inbox"
    inbox.mkdir()
    for n in range(6):
        (inbox / f"m{n}.json").write_text(
            json.dumps(
                {
                    "id": f"m{n}",
                    "from": "alice",
                    "to": "all",
                    "subject": f"task m{n}",
                    "body": "x",
                    "status": "unread",
                }
            )
        )
    workspaces = [tmp_path / "a", tmp_path / "b"]
    for ws in workspaces:
        ws.mkdir()
    env = {"WORKER_INBOX": str(inbox)}
    done: list[str] = []
    for _ in range(4):
        procs = [_start(ws, env) for ws in workspaces]
        for proc in procs:
            out, _err = proc.communicate(timeout=120)
            data = json.loads(out)
            if data["outcome"] == "success":
                done.append(data["task_id"])
    worked = [c["stdin"].split("\n", 1)[0] for c in fake_claude.task_calls]
    assert sorted(done) == sorted(set(done)), "a message was run twice"
    assert len(worked) == len(set(worked)) == len(done)
    assert sorted(done) == [f"m{n}" for n in range(6)]


def test_help_imports_no_heavy_library() -> None:
    """`worker --help` stays fast: PyGithub, GitPython, pydantic and SQLite load only when a
    command needs them (checked by module, not by the clock)."""
    code = (
        "import sys, worker.cli.app\n"
        "heavy = {'github', 'git', 'pydantic', 'sqlite3', 'tenacity'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_dry_run_imports_neither_github_nor_git(workspace: Path) -> None:
    """A dry run on the embedded defaults loads no GitHub or git library."""
    code = (
        "import sys\n"
        "from worker.cli.app import app\n"
        f"sys.argv = ['worker', 'run', '--dry-run', '--workspace', {str(workspace)!r}]\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'github', 'git'}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip().splitlines()[-1] == "[]"


@needs_posix("SIGTERM to `worker run`; on Windows send_signal(SIGTERM) terminates it outright")
def test_sigterm_to_a_run_ends_the_agent_and_releases_the_task(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """Cron or systemd ending `worker run` must not leave an orphaned agent working on while
    the lease runs out and another run takes the same task."""
    fake_claude.answers({"hang": 60, "child": True, "status": "success"}, {"status": "success"})
    write_message(workspace, "msg-term")
    proc = _start(workspace)
    _wait_for(lambda: fake_claude.calls, "the agent started")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    data = json.loads(out)
    assert data["outcome"] == "stopped" and "STOP_REQUESTED" in data["reason_codes"]
    agent = fake_claude.calls[0]["pid"]
    assert not _exists(agent) or _zombie(agent)
    # The task is available again at once, not after the lease.
    assert (workspace / "inbox" / "msg-term.json").exists()
    again = json.loads(run_worker(workspace, "run", "--json").stdout)
    assert (again["outcome"], again["task_id"]) == ("success", "msg-term")


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@needs_posix("on Windows the agent's Job Object ends it with its worker: no orphan is left")
def test_the_agent_of_a_killed_worker_is_ended_by_the_next_run(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """SIGKILL leaves the agent running in its own process group; the next run ends it before
    the task comes back, so two agents never work on one task."""
    fake_claude.answers({"hang": 120, "child": True, "status": "success"}, {"status": "success"})
    write_message(workspace, "msg-orphan")
    first = _start(workspace, {"WORKER_LEASE_SECONDS": "600"})
    _wait_for(lambda: fake_claude.calls, "the agent started")
    _wait_for(lambda: Path(str(fake_claude.log) + ".children").exists(), "its child started")
    first.kill()
    first.communicate()
    agent = fake_claude.calls[0]["pid"]
    child = int(Path(str(fake_claude.log) + ".children").read_text().split()[0])
    assert _exists(agent) and not _zombie(agent)  # orphaned, still working
    data = json.loads(run_worker(workspace, "run", "--json").stdout)
    assert "ORPHAN_AGENT_ENDED" in data["reason_codes"]
    for pid in (agent, child):
        assert not _exists(pid) or _zombie(pid), f"process {pid} survived"
    # Then, the agent gone, the task comes back in the same run (test_killed_worker_task_...).
    assert (data["outcome"], data["task_id"]) == ("success", "msg-orphan")
    assert (workspace / "inbox" / "done" / "msg-orphan.json").exists()
