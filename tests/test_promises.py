"""What the README promises, kept: `cancel '*'` drops queued tasks, `submit --reply-to` an
unknown id is refused, `show` takes a task id, `serve` prints the runs' own numbers, an
approved wait is listed as ready at once, and an unreachable GitHub is one short line. Each
through the real command."""

from __future__ import annotations

import errno
import json
import re
import socket
from pathlib import Path

import pytest

from worker.config import load_settings
from worker.state.store import Store

from .conftest import FakeAgent, run_worker, save_approval_wait, state_of, write_message

pytestmark = pytest.mark.usefixtures("only_the_task")


def test_cancel_everything_drops_the_queued_tasks_for_good(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    write_message(workspace, "msg-queued", subject="Not wanted any more")
    cancelled = run_worker(workspace, "cancel", "*", "--reason", "all off")
    assert cancelled.returncode == 0, cancelled.stderr
    for _ in range(2):  # the run that reads the order, then the next tick
        proc = run_worker(workspace, "run", "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["outcome"] == "idle"
    assert fake_claude.calls == []  # the queued task never ran
    assert not (workspace / "inbox" / "msg-queued.json").exists()  # taken off the queue
    later = write_message(workspace, "msg-later")  # a task sent after the order is not hit
    assert later.exists()
    assert json.loads(run_worker(workspace, "run", "--json").stdout)["task_id"] == "msg-later"


def test_submit_reply_to_an_unknown_id_is_refused_and_writes_nothing(workspace: Path) -> None:
    proc = run_worker(workspace, "submit", "an answer", "--reply-to", "msg-nope")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "--reply-to 'msg-nope'" in proc.stderr and "no task" in proc.stderr
    assert list((workspace / "inbox").iterdir()) == []
    write_message(workspace, "msg-known")
    known = run_worker(workspace, "submit", "an answer", "--reply-to", "msg-known")
    assert known.returncode == 0, known.stderr
    assert len(list((workspace / "inbox").iterdir())) == 2


def test_show_takes_a_task_id_for_its_latest_run(workspace: Path, fake_claude: FakeAgent) -> None:
    fake_claude.answers(
        {"status": "success", "reason": "first time"},
        {"status": "success", "reason": "second time"},
    )
    write_message(workspace, "msg-shown", subject="Shown by its id")
    assert run_worker(workspace, "run").returncode == 0
    assert run_worker(workspace, "run", "--task-id", "msg-shown").returncode == 0
    by_task = run_worker(workspace, "show", "msg-shown", "--json")
    assert by_task.returncode == 0, by_task.stderr
    data = json.loads(by_task.stdout)
    assert data["run"]["run"] == 2 and data["iterations"][0]["reason"] == "second time"
    by_number = json.loads(run_worker(workspace, "show", "1", "--json").stdout)
    assert by_number["iterations"][0]["reason"] == "first time"
    missing = run_worker(workspace, "show", "msg-nope")
    assert missing.returncode == 2 and "no run of task 'msg-nope'" in missing.stderr


def test_serve_prints_the_run_numbers_that_log_shows(workspace: Path) -> None:
    for _ in range(2):
        assert run_worker(workspace, "run").returncode == 0  # runs 1 and 2
    served = run_worker(workspace, "serve", "--max-cycles", "1", "--interval", "0.01")
    assert served.returncode == 0, served.stderr
    said = re.findall(r"run (\d+): idle", served.stdout)
    newest = json.loads(run_worker(workspace, "log", "--json").stdout)["runs"][0]["run"]
    assert said == [str(newest)] and newest == 3


def test_an_approved_wait_is_listed_as_ready_at_once(workspace: Path) -> None:
    settings = load_settings(workspace)
    with Store(settings.db_path) as store:
        save_approval_wait(settings, store, "msg-asks")
    assert run_worker(workspace, "run").returncode == 0  # the run that finds it not ready
    listed = json.loads(run_worker(workspace, "waits", "list", "--json").stdout)["waits"]
    assert [(w["task_id"], w["ready"]) for w in listed] == [("msg-asks", False)]
    approved = run_worker(workspace, "waits", "approve", "msg-asks", "--note", "go ahead")
    assert approved.returncode == 0, approved.stderr
    listed = json.loads(run_worker(workspace, "waits", "list", "--json").stdout)["waits"]
    assert [(w["task_id"], w["ready"]) for w in listed] == [("msg-asks", True)]
    text = run_worker(workspace, "waits", "list").stdout.splitlines()[1].split("\t")
    assert "yes" in text
    # Read only: the approval is still there for the run that resumes the task.
    assert list((state_of(workspace) / "intercom").rglob("*.json"))


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: a connection to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_github_is_one_short_line_per_run_with_no_retry(workspace: Path) -> None:
    port = _closed_port()
    (workspace / "worker.toml").write_text(
        f'[github]\nrepos = ["acme/app"]\nbase_url = "http://127.0.0.1:{port}"\n'
        "seconds_between_requests = 0\n",
        encoding="utf-8",
    )
    env = {"GITHUB_TOKEN": "ghp_" + "t0" * 18}
    said = f"github acme/app: cannot reach 127.0.0.1:{port} (connection refused)"
    dry = run_worker(workspace, "run", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    assert f"source error: {said}" in dry.stdout.splitlines()  # in words, not only the code
    proc = run_worker(workspace, "run", env=env)
    assert proc.returncode == 0, proc.stderr
    # One line, short; no "retrying" (a refused connection is refused again at once).
    assert proc.stderr.splitlines() == [f"warning: {said}"]
    assert len(proc.stderr) < 100 and "SOURCE_ERROR" in proc.stdout
    logged = (state_of(workspace) / "logs" / "github.log").read_text(encoding="utf-8")
    assert len(logged.splitlines()) == 1 and "Connection refused" in logged  # the whole error
    assert env["GITHUB_TOKEN"] not in logged


def test_only_a_connection_that_cannot_be_made_is_not_worth_a_retry() -> None:
    """Refused, or no such host: said in words and not retried; a timeout or a reset
    connection may pass, and is retried as before."""
    import requests

    from worker.sources.github.http import unreachable_because

    def wrapped(cause: BaseException) -> requests.ConnectionError:
        outer = requests.ConnectionError("Max retries exceeded")
        outer.__cause__ = cause
        return outer

    assert unreachable_because(wrapped(ConnectionRefusedError(errno.ECONNREFUSED, "refused"))) == (
        "connection refused"
    )
    assert unreachable_because(wrapped(socket.gaierror(-2, "not known"))) == "unknown host"
    assert unreachable_because(wrapped(ConnectionResetError(errno.ECONNRESET, "reset"))) is None
    assert unreachable_because(requests.ReadTimeout("read timed out")) is None
