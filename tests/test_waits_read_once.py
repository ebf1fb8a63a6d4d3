"""One run reads each wait-state file once: the kernel's view takes the waits phase 0 has just
read while their folder is unchanged, and a wait without intercom notes costs no folder probe."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import save_approval_wait
from worker.config import Settings, load_settings
from worker.kernel.observe import waiting_flows
from worker.state.store import Store
from worker.waits import intercom, phase0, record
from worker.waits.state import WaitState


@pytest.fixture
def settings(workspace: Path) -> Settings:
    return load_settings(workspace)


def _wait(settings: Settings, store: Store, task_id: str) -> Path:
    return save_approval_wait(settings, store, task_id)


def _count_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    checked: list[str] = []
    real = record.check

    def counting(
        path: Path, records: dict[str, str], dir_fd: int | None = None
    ) -> tuple[WaitState | None, str | None]:
        checked.append(path.name)
        return real(path, records, dir_fd)

    monkeypatch.setattr(record, "check", counting)
    return checked


def test_the_kernel_takes_the_waits_phase0_just_read(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store(settings.db_path) as store:
        for n in range(3):
            _wait(settings, store, f"w{n}")
        checked = _count_checks(monkeypatch)
        scan = phase0.scan(settings, store)
        assert scan.pending == 3 and len(checked) == 3
        flows = waiting_flows(settings, skip=set())
    assert sorted(f.task.id for f in flows) == ["w0", "w1", "w2"]
    assert len(checked) == 3, "the kernel read the wait files again"


def test_a_wait_added_after_phase0_is_seen_by_the_kernel(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store(settings.db_path) as store:
        _wait(settings, store, "early")
        phase0.scan(settings, store)
        _wait(settings, store, "late")
        os.utime(settings.wait_states, ns=(1, 1))  # whatever the clock's grain
    assert sorted(f.task.id for f in waiting_flows(settings, skip=set())) == ["early", "late"]


def test_a_removed_wait_is_gone_from_the_kernels_view(settings: Settings) -> None:
    with Store(settings.db_path) as store:
        _wait(settings, store, "stays")
        gone = _wait(settings, store, "goes")
        phase0.scan(settings, store)
    gone.unlink()
    assert [f.task.id for f in waiting_flows(settings, skip=set())] == ["stays"]


def test_waits_without_notes_probe_no_intercom_folder(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a task with an intercom folder has its notes read; the others cost nothing."""
    with Store(settings.db_path) as store:
        for n in range(5):
            _wait(settings, store, f"w{n}")
        intercom.write_note(settings, "w3", "approval", "go ahead")
        read: list[str] = []
        real = intercom.read_notes

        def counting(s: Settings, folder: Path, quarantine_bad: bool = True) -> object:
            read.append(folder.name)
            return real(s, folder, quarantine_bad)

        monkeypatch.setattr(intercom, "read_notes", counting)
        scan = phase0.scan(settings, store)
    assert read == ["w3"]
    assert [r.task.id for r in scan.ready] == ["w3"] and scan.pending == 4
