"""The state folder: per workspace in the user's state home, migrated from `.worker/`, shown by
`worker status`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_worker, state_of
from worker.config import load_settings
from worker.errors import ConfigError
from worker.state import statedir


def test_the_state_home_follows_xdg_and_windows_conventions(tmp_path: Path) -> None:
    assert statedir.state_home({"XDG_STATE_HOME": "/x/state"}, "linux") == Path("/x/state/worker")
    relative = statedir.state_home({"XDG_STATE_HOME": "rel"}, "linux")  # ignored, as XDG says
    assert relative == Path.home() / ".local" / "state" / "worker"
    assert statedir.state_home({}, "darwin") == Path.home() / ".local" / "state" / "worker"
    windows = statedir.state_home({"LOCALAPPDATA": str(tmp_path)}, "win32")
    assert windows == tmp_path / "worker"


def test_workspace_ids_are_readable_stable_and_distinct(tmp_path: Path) -> None:
    one, two = tmp_path / "a" / "app", tmp_path / "b" / "app"
    one.mkdir(parents=True)
    two.mkdir(parents=True)
    assert statedir.workspace_id(one).startswith("app-")
    assert statedir.workspace_id(one) == statedir.workspace_id(tmp_path / "a" / ".." / "a" / "app")
    assert statedir.workspace_id(one) != statedir.workspace_id(two)
    odd = tmp_path / "my app (old)"
    odd.mkdir()
    assert statedir.workspace_id(odd).startswith("my_app_old-")


def test_state_is_out_of_the_working_tree_unless_configured(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    assert not statedir.is_inside(settings.state, tmp_path)
    assert settings.db_path.parent == settings.state and settings.inbox.parent == settings.state
    (tmp_path / "worker.toml").write_text('state_dir = "own-state"\n')
    with pytest.raises(ConfigError, match="state_dir"):  # its inbox would be the agent's
        load_settings(tmp_path)
    (tmp_path / "worker.toml").write_text(
        'state_dir = "own-state"\nallow_inbox_in_workspace = true\n'
    )
    moved = load_settings(tmp_path)
    assert moved.state == tmp_path.resolve() / "own-state"
    assert statedir.exposed(moved) == ["state_dir", "inbox_dir"]


def test_an_old_state_folder_is_moved_on_the_first_run_with_a_line_saying_so(
    workspace: Path, fake_claude: object
) -> None:
    old = workspace / ".worker"
    (old / "logs").mkdir(parents=True)
    (old / "logs" / "keep.txt").write_text("history")
    status = run_worker(workspace, "status")
    assert "the next run moves it" in status.stderr and old.exists()  # status changes nothing
    result = run_worker(workspace, "run", "--json", env={"WORKER_FALLBACK__ENABLED": "false"})
    assert result.returncode == 0, result.stderr
    assert "worker state moved from" in result.stderr
    assert not old.exists()
    assert (state_of(workspace) / "logs" / "keep.txt").read_text() == "history"


def test_an_old_state_folder_never_overwrites_a_newer_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "worker.db").write_text("new")
    (tmp_path / ".worker").mkdir()
    (tmp_path / ".worker" / "worker.db").write_text("old")
    line = statedir.migrate_legacy(tmp_path, state)
    assert line is not None and "was not moved" in line
    assert (state / "worker.db").read_text() == "new"
    assert (tmp_path / ".worker" / "worker.db").read_text() == "old"


def test_status_says_where_the_state_and_the_inbox_live(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    result = run_worker(ws, "status", "--json")
    assert result.returncode == 0, result.stderr
    state = json.loads(result.stdout)["state"]
    expected = load_settings(ws)
    assert state["state_dir"] == str(expected.state)
    assert state["inbox_dir"] == str(expected.state / "inbox")
    assert state["in_workspace"] == [] and state["legacy_state"] is None
    text = run_worker(ws, "status").stdout
    assert f"state: {expected.state}" in text
