"""Operator fixes: unknown ids refused, `log` with titles and outcome codes (and `-f`),
`show RUN` iteration by iteration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FakeAgent, aged, run_worker, state_of, write_message

pytestmark = pytest.mark.usefixtures("only_the_task")


def _orders(ws: Path) -> list[dict[str, str]]:
    folder = state_of(ws) / "control"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def test_cancel_of_an_unknown_id_exits_2_naming_the_known_ones(workspace: Path) -> None:
    write_message(workspace, "msg-real")
    proc = run_worker(workspace, "cancel", "msg-nope")
    assert proc.returncode == 2
    assert "no task 'msg-nope' is known here" in proc.stderr and "msg-real" in proc.stderr
    assert "--force" in proc.stderr
    assert _orders(workspace) == []
    assert run_worker(workspace, "cancel", "msg-real").returncode == 0
    assert [o["task"] for o in _orders(workspace)] == ["msg-real"]


def test_cancel_force_leaves_an_order_for_a_task_not_seen_yet(workspace: Path) -> None:
    proc = run_worker(workspace, "cancel", "msg-later", "--force", "--reason", "not wanted")
    assert proc.returncode == 0, proc.stderr
    assert [(o["task"], o["reason"]) for o in _orders(workspace)] == [("msg-later", "not wanted")]
    assert run_worker(workspace, "cancel", "*").returncode == 0  # every task: always allowed


def test_intercom_send_to_an_unknown_id_exits_2_and_writes_nothing(workspace: Path) -> None:
    proc = run_worker(workspace, "intercom", "send", "msg-nope", "hello")
    assert proc.returncode == 2 and "no task 'msg-nope' is known here" in proc.stderr
    assert not (state_of(workspace) / "intercom").exists()
    forced = run_worker(workspace, "intercom", "send", "msg-nope", "hello", "--force")
    assert forced.returncode == 0, forced.stderr
    assert list((state_of(workspace) / "intercom").rglob("*.json"))


def test_log_shows_titles_outcome_codes_and_what_ended_a_run_uncut(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    title = "Rename the configuration loader " + "and its callers " * 6
    write_message(workspace, "msg-long", subject=title.strip())
    fake_claude.answers({"status": "failure", "reason": "the loader is generated code"})
    assert run_worker(workspace, "run", "--mode", "sync-complex").returncode == 1
    missing = {"WORKER_CLAUDE_BIN": str(workspace / "no-such-claude")}
    write_message(workspace, "msg-later")
    assert run_worker(workspace, "run", env=missing).returncode != 0
    text = run_worker(workspace, "log", env={"COLUMNS": "80"}).stdout
    header, newest, older = text.splitlines()[:3]
    cells = dict(zip(header.split("\t"), older.split("\t"), strict=True))
    assert cells["title"] == title.strip()  # longer than 120 characters with the rest, uncut
    assert cells["outcome"] == "failure" and cells["outcome codes"] == "FAILURE_AT_TOP_MODE"
    assert cells["why"] == "the loader is generated code"
    assert cells["decision"].startswith("INBOX_TASK_SELECTED")
    ended = dict(zip(header.split("\t"), newest.split("\t"), strict=True))
    assert "no-such-claude" in ended["why"]  # the agent program is missing: said in words


def test_show_lists_each_iteration_with_status_cost_tools_and_files(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    write_message(workspace, "msg-show", subject="Write the notes")
    fake_claude.answers(
        {
            "status": "continue",
            "reason": "halfway",
            "cost": 0.02,
            "tools": [
                {"name": "Write", "input": {"file_path": "notes.md", "content": "x"}},
                {"name": "Bash", "input": {"command": "ls"}},
                {"name": "Bash", "input": {"command": "pwd"}},
            ],
        },
        {"status": "success", "reason": "notes written", "cost": 0.03},
    )
    assert run_worker(workspace, "run").returncode == 0
    data = json.loads(run_worker(workspace, "show", "1", "--json").stdout)
    first, second = data["iterations"]
    assert (first["status"], first["reason"], first["cost_usd"]) == ("continue", "halfway", 0.02)
    assert first["tools"] == {"Write": 1, "Bash": 2} and first["files"] == ["notes.md"]
    assert (second["status"], second["tools"], second["files"]) == ("success", {}, [])
    text = run_worker(workspace, "show", "1").stdout
    assert "STATUS: continue - halfway" in text and "tools: Write x1, Bash x2" in text
    assert "files written: notes.md" in text and "$0.0200" in text
    missing = run_worker(workspace, "show", "99")
    assert missing.returncode == 2 and "no run 99" in missing.stderr


def test_log_follow_prints_a_run_as_it_happens(workspace: Path, fake_claude: FakeAgent) -> None:
    """`worker log -f` started first prints the run started later, up to its outcome."""
    env = {**os.environ, **fake_claude.env()}
    seen = []
    with subprocess.Popen(
        [sys.executable, "-m", "worker", "log", "-f", "--json", "--workspace", str(workspace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    ) as follower:
        try:
            write_message(workspace, "msg-followed", subject="Followed task")
            assert run_worker(workspace, "run").returncode == 0
            assert follower.stdout is not None
            for line in follower.stdout:  # until the outcome is printed
                seen.append(json.loads(line))
                if seen[-1]["outcome"] not in (None, "running"):
                    break
        finally:
            follower.kill()
    last = seen[-1]
    assert (last["task"], last["title"], last["outcome"]) == (
        "msg-followed",
        "Followed task",
        "success",
    )


def test_warnings_are_plain_lines_unless_verbose(workspace: Path) -> None:
    """A bad message is warned about as `warning: ...`, not as a raw log record; with -v the
    record keeps its time, level and logger."""
    (workspace / "inbox" / "bad.json").write_text('{"to": "all", "id": 1}', encoding="utf-8")
    aged(workspace / "inbox" / "bad.json")
    proc = run_worker(workspace, "run")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("warning: inbox: bad.json: invalid message")
    assert "WARNING worker." not in proc.stderr
    (workspace / "inbox" / "bad2.json").write_text('{"to": "all", "id": 2}', encoding="utf-8")
    aged(workspace / "inbox" / "bad2.json")
    verbose = run_worker(workspace, "-v", "run")
    assert "WARNING worker.sources.inbox: inbox: bad2.json" in verbose.stderr
