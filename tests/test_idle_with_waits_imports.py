"""An idle run with waits and an inbox of other machines' messages imports no more than an
idle run with nothing: GitHub's wait checks only for a wait that can be on an issue, the
reply rules only with a reply to read. (Imported for every wait, they cost such a run about
5 ms more than an empty one.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import save_approval_wait, write_message
from tests.test_startup_imports import _modules_of
from worker.config import load_settings
from worker.state.store import Store

ONLY_WITH_GITHUB_OR_A_REPLY = (
    "worker.kernel.replies",
    "worker.waits.github_checks",
    "worker.waits.github_look",
    "worker.sources.github.selection",
)


def _wait(ws: Path, task_id: str, **fields: object) -> None:
    settings = load_settings(ws)
    with Store(settings.db_path) as store:
        save_approval_wait(settings, store, task_id, **fields)


@pytest.fixture
def busy(workspace: Path) -> Path:
    (workspace / "worker.toml").write_text("[fallback]\nenabled = false\n")
    for n in range(3):
        write_message(workspace, f"m{n}", to="machine-2")
        _wait(workspace, f"w{n}")
    return workspace


def test_waits_and_messages_for_others_import_neither_github_nor_the_reply_rules(
    busy: Path,
) -> None:
    loaded = _modules_of(busy, "run", "--json")
    assert "worker.waits.phase0" in loaded  # it did look at the waits
    assert sorted(loaded.intersection(ONLY_WITH_GITHUB_OR_A_REPLY)) == []


def test_a_wait_on_a_github_issue_still_brings_github_s_checks(busy: Path) -> None:
    _wait(busy, "owner/name#12")
    loaded = _modules_of(busy, "run", "--json")
    assert "worker.waits.github_checks" in loaded


def test_a_reply_to_a_waiting_task_still_brings_the_reply_rules(busy: Path) -> None:
    write_message(busy, "r1", to="test-machine", in_reply_to="w1", body="any news?")
    loaded = _modules_of(busy, "run", "--json")
    assert "worker.kernel.replies" in loaded
