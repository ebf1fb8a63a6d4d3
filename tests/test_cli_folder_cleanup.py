"""A GitHub task's own CLI folder (worker/sandbox/cli_home.py) lives as long as the task: kept
while the task waits on its pull request (it resumes its session from there), removed when the
task ends for good, and swept by retention when that removal never happened. The agent wrote
that folder: a link it left there is removed, never followed.

Against the fake GitHub, the fake claude, real git and SQLite on disk.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import FakeAgent
from tests.fakes.github_server import FakeGitHub
from tests.test_github_delivery import (  # the delivery's set-ups: a project, its pull request
    REPO,
    TASK,
    _green_approved_labelled,
    _open,
    _repo,
    _run,
    _wait_due,
)
from worker.cli.app import app
from worker.config import load_settings
from worker.sandbox import cli_home
from worker.state.retention import prune
from worker.state.store import Store

_OLD = 400 * 86400.0  # older than any default retention


@pytest.fixture
def server(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_issue(
        REPO, 7, title="Fix the parser", labels=("roo-schedulable",), body="Agent: Any\n\nFix it."
    )
    return fake_github


def _plant_links(own: Path, outside: Path) -> None:
    """What an agent may leave in its folder: links to the operator's files and folders."""
    outside.mkdir()
    (outside / "keep.txt").write_text("operator's\n")
    (own / "claude" / "to-a-folder").symlink_to(outside, target_is_directory=True)
    (own / "claude" / "to-a-file").symlink_to(outside / "keep.txt")


def test_the_folder_stays_while_the_task_waits_and_goes_when_its_pull_request_merges(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    """Waiting on its pull request the task keeps its folder; the merge ends it (success) and
    the folder is removed, the links in it unlinked and what they point at untouched."""
    ws = _repo(tmp_path, server)
    pull = _open(ws, server, fake_claude)
    own = cli_home.folder_for(load_settings(ws).state, TASK)
    assert (own / "claude").is_dir()
    outside = tmp_path / "operator"
    _plant_links(own, outside)
    _green_approved_labelled(server, pull)
    report = _run(ws)
    assert (report.outcome.value, report.task_id) == ("success", TASK), report.reason
    assert not own.exists() and not own.is_symlink()
    assert (outside / "keep.txt").read_text() == "operator's\n"


def test_a_pull_request_closed_by_a_person_ends_the_task_and_removes_its_folder(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    """Closed unmerged by a person: the task ends cancelled without an agent; its folder goes."""
    ws = _repo(tmp_path, server)
    _open(ws, server, fake_claude)
    own = cli_home.folder_for(load_settings(ws).state, TASK)
    assert own.is_dir()
    server.close_pull(REPO, 1000, "maintainer", merged=False)
    _wait_due(ws)
    report = _run(ws)
    assert (report.outcome.value, report.task_id) == ("cancelled", TASK), report.reason
    assert not own.exists()


def test_a_task_that_failed_leaves_no_folder(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    """A failure ends the task for good (no pull request to follow): its folder is removed."""
    ws = _repo(tmp_path, server)
    fake_claude.answers({"status": "failure", "reason": "cannot reproduce"})
    report = _run(ws)
    assert (report.outcome.value, report.task_id) == ("failure", TASK), report.reason
    assert not cli_home.folder_for(load_settings(ws).state, TASK).exists()
    assert (load_settings(ws).state / cli_home.FOLDER).is_dir()  # made, then emptied


def test_worker_cancel_of_the_waiting_task_removes_its_folder(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent, cli: CliRunner
) -> None:
    """`worker cancel` while the task waits on its open pull request: the run that carries
    the order out ends the task cancelled and removes its folder."""
    ws = _repo(tmp_path, server)
    _open(ws, server, fake_claude)
    own = cli_home.folder_for(load_settings(ws).state, TASK)
    assert own.is_dir()
    cancelled = cli.invoke(app, ["cancel", TASK, "-w", str(ws)])
    assert cancelled.exit_code == 0, cancelled.output
    _run(ws)
    assert not own.exists()
    assert "worker:cancelled" in server.labels_of(REPO, 7)


def test_a_folder_that_is_a_link_is_unlinked_and_what_it_points_at_kept(tmp_path: Path) -> None:
    """The task's folder itself a link (to the operator's files): the link goes, not them."""
    state, outside = tmp_path / "state", tmp_path / "operator"
    outside.mkdir()
    (outside / "keep.txt").write_text("operator's\n")
    own = cli_home.folder_for(state, "acme/app#5")
    own.parent.mkdir(parents=True)
    own.symlink_to(outside, target_is_directory=True)
    assert cli_home.remove(state, "acme/app#5")
    assert not own.is_symlink() and (outside / "keep.txt").read_text() == "operator's\n"
    assert not cli_home.remove(state, "acme/app#5")  # nothing left: nothing removed


def _aged(folder: Path, seconds_ago: float) -> None:
    at = os.path.getmtime(folder) - seconds_ago
    for path in [folder, *folder.iterdir()]:
        os.utime(path, (at, at), follow_symlinks=False)


def _folder(state: Path, task_id: str) -> Path:
    own = cli_home.folder_for(state, task_id)
    (own / "claude").mkdir(parents=True)
    (own / "claude" / "settings.json").write_text("{}")
    return own


def test_retention_sweeps_the_folders_of_tasks_long_gone_and_keeps_waiting_and_running_ones(
    tmp_path: Path, cli: CliRunner
) -> None:
    """`worker prune`: an old folder of a task that neither waits nor runs is removed (links
    in it unlinked, never followed); an old one of a waiting task, one of a running task and
    a recent one are kept. `--dry-run` counts and removes nothing."""
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = load_settings(ws)
    gone = _folder(settings.state, "acme/app#1")
    waiting = _folder(settings.state, "acme/app#2")
    running = _folder(settings.state, "acme/app#3")
    recent = _folder(settings.state, "acme/app#4")
    outside = tmp_path / "operator"
    _plant_links(gone, outside)
    for folder in (gone, waiting, running):
        _aged(folder, _OLD)
    settings.wait_states.mkdir(parents=True, exist_ok=True)
    (settings.wait_states / f"{waiting.name}.json").write_text("{}")
    with Store(settings.db_path) as store:
        assert store.claim("acme/app#3", "github", "m1", os.getpid(), 3600)

    dry = cli.invoke(app, ["prune", "--dry-run", "--json", "-w", str(ws)])
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["cli_folders"] == 1 and gone.exists()

    with Store(settings.db_path) as store:
        report = prune(settings, store)
    assert report.cli_folders == 1
    assert not gone.exists() and (outside / "keep.txt").read_text() == "operator's\n"
    assert waiting.exists() and running.exists() and recent.exists()
