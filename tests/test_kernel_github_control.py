"""Control orders from GitHub comments, against the local fake GitHub server: `/cancel`,
`/stop`, `/pause`, `/resume` by a trusted user on an issue this machine holds (claimed or
waiting), after the claim or the wait began; obeyed once; cheap when nothing changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FakeAgent
from tests.fakes.github_server import FakeGitHub, settings_for
from tests.test_waits_conditions import make_wait
from worker.config import Settings, load_settings
from worker.kernel import control, db
from worker.kernel.github_hook import DONE_KEY, GitHubControl
from worker.kernel.model import Order
from worker.kernel.orders import read_orders
from worker.kernel.watcher import StopWatcher
from worker.models import Outcome, Task, TaskResult
from worker.run.runner import RunOptions, run_once
from worker.sources.github.source import GitHubSource
from worker.state.store import Store

REPO = "acme/app"
TASK = f"{REPO}#7"


@pytest.fixture
def server(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_issue(
        REPO, 7, title="Fix the parser", body="Agent: Any"
    )  # not labelled: no task
    return fake_github


def make_settings(ws: Path, server: FakeGitHub, **github: Any) -> Settings:
    github = {"retries": 0, "control_poll_s": 0, **github}
    return load_settings(ws, fallback={"enabled": False}, github=settings_for(server, **github))


@pytest.fixture
def settings(workspace: Path, server: FakeGitHub) -> Settings:
    return make_settings(workspace, server)


def claim(settings: Settings, number: int = 7) -> None:
    """What the GitHub source records when it takes an issue."""
    with Store(settings.db_path) as store:
        assert store.claim(
            f"{REPO}#{number}",
            "github",
            settings.machine_id,
            os.getpid(),
            600,
            repo=REPO,
            number=number,
        )


def schedulable(server: FakeGitHub) -> None:
    """Issue 7 becomes a task: labelled by a maintainer."""
    server.repos[REPO]["issues"][7]["labels"] = [server._label("roo-schedulable")]
    server.repos[REPO]["events"][7] = [
        server._event("labeled", "maintainer", "roo-schedulable", time.time() - 60)
    ]


def orders(settings: Settings) -> list[control.ControlOrder]:
    return GitHubControl(settings).orders()


def done_ids(settings: Settings) -> list[int]:
    with Store(settings.db_path) as store:
        return list(json.loads(store.get(DONE_KEY) or "[]"))


def test_watcher_obeys_a_trusted_stop_and_the_issue_is_told(
    settings: Settings, server: FakeGitHub
) -> None:
    """Driven through `StopWatcher.check()`: the running task stops, ends cancelled with the
    comment's reason, the issue's status comment says so, and the comment is consumed."""
    schedulable(server)
    source = GitHubSource(settings, Store(settings.db_path))
    task = source.find(TASK)
    assert task is not None and source.claim(task, run_id=1)
    stop = threading.Event()
    watcher = StopWatcher(settings, task, stop)
    assert not watcher.check()
    comment = server.add_comment(REPO, 7, "/stop wrong repo", login="maintainer")
    assert watcher.check() and stop.is_set()
    result = watcher.settle(TaskResult(task, Outcome.STOPPED), "code-simple")
    assert result.outcome is Outcome.CANCELLED
    assert "stop by github: @maintainer: wrong repo" in result.reason
    assert {"SAFETY_OVERRIDE", "CANCELLED_ON_STOP"} <= set(result.reason_codes)
    source.report(task, result)
    status = [c for c in server.comments_of(REPO, 7) if c["body"].startswith("<!-- worker:claim")]
    assert len(status) == 1 and "🚫" in status[0]["body"] and "wrong repo" in status[0]["body"]
    assert "worker:cancelled" in server.labels_of(REPO, 7)  # no failure: a person stopped it
    assert done_ids(settings) == [comment["id"]]
    assert not watcher.check()  # obeyed once


def test_a_strangers_stop_is_ignored_and_a_listed_user_is_trusted(
    workspace: Path, server: FakeGitHub
) -> None:
    settings = make_settings(workspace, server, trusted_users=["Friend"])
    claim(settings)
    server.add_comment(REPO, 7, "/stop now", login="mallory", association="NONE")
    task = Task(TASK, "github", "T")
    watcher = StopWatcher(settings, task, threading.Event())
    assert not watcher.check()
    [refused] = orders(settings)
    assert (refused.order, refused.trusted, refused.sender) == (Order.STOP, False, "mallory")
    server.add_comment(REPO, 7, "/pause", login="friend", association="NONE")  # no write access
    assert watcher.check() and watcher.taken is not None
    assert watcher.taken.act.value == "pause_running"


def test_a_comment_older_than_the_claim_is_ignored(settings: Settings, server: FakeGitHub) -> None:
    server.add_comment(REPO, 7, "/cancel", login="maintainer", age_s=600)
    claim(settings)
    assert orders(settings) == []
    assert not StopWatcher(settings, Task(TASK, "github", "T"), threading.Event()).check()


def test_an_issue_without_a_stake_is_not_read(settings: Settings, server: FakeGitHub) -> None:
    server.add_comment(REPO, 7, "/cancel", login="maintainer")
    assert read_orders(settings) == []
    assert server.count(None, "/comments") == 0


def test_a_comment_is_obeyed_once_across_runs(settings: Settings, server: FakeGitHub) -> None:
    """A `/pause` on a waiting issue pauses it in the first run; a later run, with the pause
    lifted meanwhile, does not obey the same comment again."""
    make_wait(
        settings,
        TASK,
        "user_approval",
        age_s=120,
        source="github",
        sourceRef={"repo": REPO, "number": 7},
    )
    comment = server.add_comment(REPO, 7, "/pause holiday", login="maintainer")
    first = run_once(settings, RunOptions())
    assert first.outcome is Outcome.IDLE, first
    assert {"SAFETY_OVERRIDE", "PAUSED_ON_ORDER"} <= set(first.reason_codes)
    assert done_ids(settings) == [comment["id"]]
    with Store(settings.db_path) as store:
        assert db.paused_ids(store) == {TASK}
        db.resume(store, TASK)
    second = run_once(settings, RunOptions())
    assert "PAUSED_ON_ORDER" not in second.reason_codes, second
    with Store(settings.db_path) as store:
        assert db.paused_ids(store) == frozenset()


def test_an_unchanged_issue_costs_no_rate_limit(settings: Settings, server: FakeGitHub) -> None:
    claim(settings)
    server.add_comment(REPO, 7, "/stop", login="maintainer")
    assert len(orders(settings)) == 1
    costed = server.costed
    assert len(orders(settings)) == 1  # asked again: answered 304 from the ETag
    assert server.costed == costed
    assert server.log[-1].status == 304 and "/comments" in server.log[-1].path


def test_reads_are_throttled_per_process(workspace: Path, server: FakeGitHub) -> None:
    """With `control_poll_s` the stop watcher's every-second look reaches GitHub once; in
    between the last answer is served from memory."""
    settings = make_settings(workspace, server, control_poll_s=60)
    claim(settings)
    server.add_comment(REPO, 7, "/cancel", login="maintainer")
    watcher = StopWatcher(settings, Task(TASK, "github", "T"), threading.Event())
    assert watcher.check()
    requests = len(server.log)
    assert watcher.check() and watcher.check()
    assert len(server.log) == requests


def test_resume_follows_the_approvers_list(workspace: Path, server: FakeGitHub) -> None:
    """Resuming is approving: write access is not enough, a listed approver is needed."""
    plain = make_settings(workspace, server)
    claim(plain)
    server.add_comment(REPO, 7, "/resume", login="maintainer")
    [order] = orders(plain)
    assert order.order is Order.RESUME and not order.trusted
    listed = load_settings(
        workspace,
        fallback={"enabled": False},
        waits={"approvers": ["maintainer"]},
        github=settings_for(server, retries=0, control_poll_s=0),
    )
    [order] = orders(listed)
    assert order.trusted


def test_a_dry_run_asks_no_hook(settings: Settings, server: FakeGitHub) -> None:
    """Hooks keep cursors in SQLite; a dry run writes nothing, so it does not ask them."""
    claim(settings)
    server.add_comment(REPO, 7, "/cancel", login="maintainer")
    assert read_orders(settings, dry_run=True) == []
    assert server.count(None, "/comments") == 0
    assert [o.order for o in read_orders(settings)] == [Order.CANCEL]


def test_github_down_is_a_warning_not_an_error(
    settings: Settings, server: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    claim(settings)
    server.fail("GET", r"/comments$", 500, times=5)
    assert read_orders(settings) == []
    assert "github control" in caplog.text and "HTTP 500" in caplog.text


def _wait_for(predicate: Any, what: str, limit: float = 60.0) -> None:
    """Poll until `predicate()`; the limit only guards against a hung test."""
    end = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.mark.slow
def test_a_trusted_cancel_comment_stops_a_running_worker(
    workspace: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    """A real `worker run` works on a claimed issue; a maintainer comments `/cancel`: the run
    ends cancelled long before the agent would have answered, and the issue is told."""
    schedulable(server)
    section = settings_for(server, retries=0, control_poll_s=1)
    lines = ["[fallback]", "enabled = false", "[github]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in section.items()]
    (workspace / "worker.toml").write_text("\n".join(lines) + "\n")
    # The agent would answer in an hour: a run that ends at all was stopped, not waited for.
    fake_claude.answers({"hang": 3600, "status": "success"})
    run = subprocess.Popen(
        [sys.executable, "-m", "worker", "run", "--json", "--workspace", str(workspace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: bool(fake_claude.task_calls), "the agent to start")
        server.add_comment(REPO, 7, "/cancel duplicate of #3", login="maintainer")
        out, err = run.communicate(timeout=300)  # guards a hung test only
    finally:
        if run.poll() is None:
            run.kill()
    report = json.loads(out)
    assert (report["task_id"], report["outcome"]) == (TASK, "cancelled"), err
    assert "duplicate of #3" in report["reason"]
    assert {"SAFETY_OVERRIDE", "CANCELLED_ON_STOP"} <= set(report["reason_codes"])
    status = [c for c in server.comments_of(REPO, 7) if c["body"].startswith("<!-- worker:claim")]
    assert len(status) == 1 and "🚫" in status[0]["body"]
    labels = server.labels_of(REPO, 7)
    assert "worker:cancelled" in labels and "worker:in-progress" not in labels
    assert "worker:failed" not in labels
