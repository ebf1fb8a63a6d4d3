"""Links the agent plants in the tree are never followed by worker: the configuration guard, the
legacy `wait_states/` migration, quarantine and the wait folder act on the paths themselves.

The stand-in agent is the fake `claude` of tests/conftest.py with shell lines before it (what
an agent's shell tool would run), or the test writing where the agent can write."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.conftest import FakeAgent, needs_posix, save_approval_wait, write_message
from worker.config import load_settings
from worker.run.runner import RunOptions, run_once
from worker.state.fsutil import quarantine
from worker.state.statedir import legacy_wait_states, migrate_wait_states
from worker.state.store import Store
from worker.waits.state import wait_state_files

pytestmark = needs_posix("symbolic links made by a shell")

SHIPPED_MODES = Path(__file__).resolve().parents[1] / "modes" / "modes.json"


def _agent_runs(fake_claude: FakeAgent, shell: str) -> None:
    wrapper = fake_claude.path.read_text()
    fake_claude.path.write_text(wrapper.replace("exec ", f"{shell}\nexec "))


def _other_workspace(tmp_path: Path) -> Path:
    """Another folder of the operator's, holding a modes file of its own."""
    other = tmp_path / "other" / "modes"
    other.mkdir(parents=True)
    (other / "modes.json").write_text('{"other": "workspace"}\n')
    return other


@pytest.mark.parametrize("had_modes", [True, False], ids=["modes-present", "modes-absent"])
def test_modes_folder_made_a_link_is_removed_not_written_through(
    workspace: Path,
    fake_claude: FakeAgent,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    had_modes: bool,
) -> None:
    """The agent replaces `modes/` with a link to another folder: the guard writes nothing
    there and deletes nothing there; `modes/` is a folder again, holding what it held."""
    other = _other_workspace(tmp_path)
    if had_modes:
        (workspace / "modes").mkdir()
        (workspace / "modes" / "modes.json").write_text(SHIPPED_MODES.read_text())
    _agent_runs(fake_claude, f"rm -rf modes && ln -s {other} modes")
    write_message(workspace, "msg-link")
    with caplog.at_level(logging.WARNING):
        report = run_once(load_settings(workspace), RunOptions())
    assert "WORKER_CONFIG_RESTORED" in report.reason_codes
    assert (other / "modes.json").read_text() == '{"other": "workspace"}\n'
    assert sorted(p.name for p in other.iterdir()) == ["modes.json"]
    assert not (workspace / "modes").is_symlink()
    if had_modes:
        assert (workspace / "modes" / "modes.json").read_text() == SHIPPED_MODES.read_text()
    else:
        assert not (workspace / "modes").exists()
    assert "modes is a symbolic link" in caplog.text


def test_modes_file_made_a_link_is_not_read_through(
    workspace: Path, fake_claude: FakeAgent, tmp_path: Path
) -> None:
    """`modes/modes.json` made a link to a file of the operator's: the guard does not copy that
    file into the run's logs; it puts the modes file back."""
    secret = tmp_path / "secret.txt"
    secret.write_text("operator's secret\n")
    (workspace / "modes").mkdir()
    (workspace / "modes" / "modes.json").write_text(SHIPPED_MODES.read_text())
    _agent_runs(fake_claude, f"rm modes/modes.json && ln -s {secret} modes/modes.json")
    write_message(workspace, "msg-file-link")
    settings = load_settings(workspace)
    report = run_once(settings, RunOptions())
    assert "WORKER_CONFIG_RESTORED" in report.reason_codes
    assert not (workspace / "modes" / "modes.json").is_symlink()
    assert (workspace / "modes" / "modes.json").read_text() == SHIPPED_MODES.read_text()
    assert secret.read_text() == "operator's secret\n"
    kept = "".join(p.read_text() for p in settings.logs.rglob("agent-modes.json"))
    assert "operator's secret" not in kept and "symbolic link" in kept


def test_worker_toml_made_a_fifo_does_not_hang_the_run_and_is_put_back(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """The agent replaces worker.toml with a FIFO (a read of it would wait for a writer for
    good): the guard does not read it; it puts the file back and the run ends."""
    (workspace / "worker.toml").write_text('machine_id = "box-1"\n')
    _agent_runs(fake_claude, "rm worker.toml && mkfifo worker.toml")
    write_message(workspace, "msg-fifo")
    report = run_once(load_settings(workspace), RunOptions())
    assert "WORKER_CONFIG_RESTORED" in report.reason_codes
    assert (workspace / "worker.toml").read_text() == 'machine_id = "box-1"\n'


def test_a_legacy_wait_states_link_into_the_inbox_is_not_migrated(
    workspace: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`<workspace>/wait_states` made a link (here into a folder of messages): the migration of
    an older worker's waits moves nothing from there, and says why."""
    monkeypatch.delenv("WORKER_WAIT_STATES_DIR")  # the default folder: the legacy one counts
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "msg-planted.json").write_text(json.dumps({"id": "planted"}))
    (workspace / "wait_states").symlink_to(elsewhere, target_is_directory=True)
    settings = load_settings(workspace)
    with caplog.at_level(logging.WARNING):
        assert legacy_wait_states(settings) is None
        assert migrate_wait_states(settings) is None
    assert (elsewhere / "msg-planted.json").exists()
    assert not settings.wait_states.exists() or wait_state_files(settings.wait_states) == []
    assert "wait_states is a symbolic link" in caplog.text


def test_links_inside_a_legacy_wait_states_folder_stay_where_they_are(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real legacy folder with a link in it (to a file outside): the link is not moved into
    worker's wait folder (nor what it points at); the real waits are."""
    monkeypatch.delenv("WORKER_WAIT_STATES_DIR")
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    old = workspace / "wait_states"
    old.mkdir()
    (old / "real.json").write_text("{}")
    (old / "linked.json").symlink_to(outside)
    settings = load_settings(workspace)
    assert migrate_wait_states(settings) is not None
    assert (settings.wait_states / "real.json").exists()
    assert (
        not (settings.wait_states / "linked.json").exists() and (old / "linked.json").is_symlink()
    )


def test_an_in_tree_wait_folder_made_a_link_into_the_inbox_is_never_written(
    workspace: Path, tmp_path: Path
) -> None:
    """With `wait_states_dir` in the tree, the agent makes it a link to the inbox: worker neither
    saves a wait state there (which the next run would take as a message) nor reads the
    inbox's files as waits."""
    settings = load_settings(workspace)
    inbox = settings.inbox
    (inbox / "a-message.json").write_text(json.dumps({"id": "a-message"}))
    (workspace / "wait_states").symlink_to(inbox, target_is_directory=True)
    assert settings.wait_states == workspace / "wait_states"
    assert wait_state_files(settings.wait_states) == []
    with pytest.raises(OSError, match="symbolic link"), Store(settings.db_path) as store:
        save_approval_wait(settings, store, "t-1")
    assert sorted(p.name for p in inbox.iterdir()) == ["a-message.json"]


def test_quarantine_into_a_folder_made_a_link_writes_nothing_where_it_points(
    tmp_path: Path,
) -> None:
    """A bad file is set aside into `rejected/`, which the agent made a link to the inbox: the
    link is replaced by a folder of worker's; the inbox gets nothing."""
    waits, inbox = tmp_path / "wait_states", tmp_path / "inbox"
    waits.mkdir()
    inbox.mkdir()
    bad = waits / "bad.json"
    bad.write_text(json.dumps({"id": "planted", "subject": "run me"}))
    (waits / "rejected").symlink_to(inbox, target_is_directory=True)
    moved = quarantine(bad, waits / "rejected", "not a wait state")
    assert moved == waits / "rejected" / "bad.json"
    assert not (waits / "rejected").is_symlink() and moved.exists()
    assert list(inbox.iterdir()) == []
