"""The wait-state folder: in the state folder by default, so a task that waits leaves nothing
untracked in the user's repository; the files keep the specification's format where `worker
waits show` finds them; `wait_states_dir` still puts them elsewhere; an older worker's
`<workspace>/wait_states/` is moved by the next run, its other files left."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import FakeAgent, git, save_approval_wait
from worker.cli.app import app
from worker.config import load_settings

WAIT = {
    "status": "wait",
    "reason": "need approval",
    "wait_for": "a human",
    "resume_when": "user_approval",
}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository with one commit, the default folders for everything of worker's (no
    maintenance task: each run is about the task submitted)."""
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    ws = tmp_path / "repo"
    ws.mkdir()
    git(ws, "init", "-q")
    (ws / "README.md").write_text("hello\n")
    git(ws, "add", ".")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init")
    return ws


def _submit_and_run(cli: CliRunner, ws: Path) -> None:
    submitted = cli.invoke(app, ["submit", "ask first", "-w", str(ws)])
    assert submitted.exit_code == 0, submitted.output
    ran = cli.invoke(app, ["run", "--json", "-w", str(ws)])
    assert json.loads(ran.stdout)["outcome"] == "waiting", ran.output


def test_a_task_that_waits_leaves_nothing_in_the_repository(
    cli: CliRunner, repo: Path, fake_claude: FakeAgent
) -> None:
    fake_claude.answers(WAIT)
    _submit_and_run(cli, repo)
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert not (repo / "wait_states").exists()
    settings = load_settings(repo)
    (path,) = settings.wait_states.glob("*.json")
    assert settings.wait_states == settings.state / "wait_states"
    data = json.loads(path.read_text())  # the specification's format
    assert data["resumeWhen"] == "user_approval" and data["waitFor"] == "a human"
    shown = cli.invoke(app, ["waits", "show", data["taskId"], "--json", "-w", str(repo)])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["file"].endswith(path.name)


def test_a_configured_wait_states_dir_is_where_the_waits_go(
    cli: CliRunner, repo: Path, fake_claude: FakeAgent
) -> None:
    (repo / "worker.toml").write_text('wait_states_dir = "../waits-here"\n')
    fake_claude.answers(WAIT)
    _submit_and_run(cli, repo)
    assert len(list((repo.parent / "waits-here").glob("*.json"))) == 1
    assert not (load_settings(repo).state / "wait_states").exists()


def test_an_older_workers_wait_states_folder_is_moved_by_the_next_run(
    cli: CliRunner, repo: Path, fake_claude: FakeAgent
) -> None:
    """Waits an older worker wrote in `<repo>/wait_states/` (recorded in its database) are
    listed by doctor, moved by the next run and still known as recorded; the repository's own
    `.gitkeep` stays."""
    old = repo / "wait_states"
    old.mkdir()
    (old / ".gitkeep").write_text("")
    older = load_settings(repo).model_copy(update={"wait_states_dir": Path("wait_states")})
    save_approval_wait(older, None, "msg-old")
    (old / "rejected").mkdir()
    (old / "rejected" / "bad.json").write_text("{")
    doctor = json.loads(cli.invoke(app, ["doctor", "--json", "-w", str(repo)]).stdout)
    reach = [f["message"] for f in doctor["findings"] if f["check"] == "reach"]
    assert any(f"wait states in {old}" in message for message in reach)
    fake_claude.answers({"status": "success", "reason": "done"})
    cli.invoke(app, ["run", "-w", str(repo)])
    settings = load_settings(repo)
    assert sorted(p.name for p in old.iterdir()) == [".gitkeep"]
    assert (settings.wait_states / "msg-old.json").exists()
    assert (settings.wait_states / "rejected" / "bad.json").exists()
    listed = json.loads(cli.invoke(app, ["waits", "list", "--json", "-w", str(repo)]).stdout)
    waits = listed["waits"] if isinstance(listed, dict) else listed
    assert [wait["task_id"] for wait in waits] == ["msg-old"]
