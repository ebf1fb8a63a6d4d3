"""Phase 0 takes a wait file as recorded without reading it while the file keeps the
signature it had when last found equal to its record (`worker.waits.record`). Any change to
the file (in place with its size and mtime put back, a rename over it, a symbolic link) or
to the record, or a file changed too recently to be sure of, makes it read and compared
again: an edit is never let through."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.conftest import needs_posix, save_approval_wait
from worker.config import Settings, load_settings
from worker.state.store import Store
from worker.waits import phase0, record

pytestmark = needs_posix("signatures hold on POSIX only (ctime is a change time there)")


@pytest.fixture
def settings(workspace: Path) -> Settings:
    return load_settings(workspace)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the wait files the record check reads, in order."""
    opened: list[str] = []
    real = record.read_text

    def counting(path: Path | str, dir_fd: int | None = None) -> str:
        opened.append(Path(path).name)
        return real(path, dir_fd)

    monkeypatch.setattr(record, "read_text", counting)
    return opened


def later(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The checks from now on happen `seconds` after the files were last written."""
    monkeypatch.setattr(record, "_now_ns", lambda: time.time_ns() + int(seconds * 1e9))


def _scan(settings: Settings, store: Store) -> phase0.WaitScan:
    phase0._read.clear()  # every call is a run of its own
    return phase0.scan(settings, store)


def test_a_settled_wait_file_found_as_recorded_is_not_read_again_while_unchanged(
    settings: Settings, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store(settings.db_path) as store:
        for n in range(3):
            save_approval_wait(settings, store, f"w{n}")
        later(monkeypatch, 10)
        assert _scan(settings, store).pending == 3
        assert sorted(reads) == ["w0.json", "w1.json", "w2.json"]
        reads.clear()
        scan = _scan(settings, store)
    assert (scan.pending, scan.errors, reads) == (3, [], [])


def test_a_wait_file_edited_in_place_with_its_size_and_mtime_put_back_is_caught(
    settings: Settings, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ctime, which no program can set back, shows the edit: the file is read, found
    edited, set aside and written back as recorded."""
    with Store(settings.db_path) as store:
        path = save_approval_wait(settings, store, "w0")
        later(monkeypatch, 10)
        _scan(settings, store)
        before = path.stat()
        text = path.read_text(encoding="utf-8")
        edited = text.replace('"user_approval"', '"time:2000-01-01"')
        edited = edited.replace('"an approval"', '"approval."')  # resume now, same size
        assert len(edited) == len(text)
        with path.open("r+", encoding="utf-8") as handle:  # in place: the same inode
            handle.write(edited)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert (path.stat().st_size, path.stat().st_ino) == (before.st_size, before.st_ino)
        later(monkeypatch, 20)
        reads.clear()
        scan = _scan(settings, store)
    assert reads == ["w0.json"]
    assert len(scan.errors) == 1 and record.EDITED in scan.errors[0]
    assert path.read_text(encoding="utf-8") == text  # written back as recorded
    assert (settings.wait_states / "rejected" / "w0.json").read_text(encoding="utf-8") == edited


def test_a_wait_file_replaced_by_a_rename_is_read_and_a_link_never_read_through(
    settings: Settings, reads: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with Store(settings.db_path) as store:
        path = save_approval_wait(settings, store, "w0")
        later(monkeypatch, 10)
        _scan(settings, store)
        text = path.read_text(encoding="utf-8")
        copy = tmp_path / "copy.json"
        copy.write_text(text, encoding="utf-8")
        os.replace(copy, path)  # the same text, another inode
        later(monkeypatch, 20)
        reads.clear()
        assert _scan(settings, store).errors == []
        assert reads == ["w0.json"]
        target = tmp_path / "target.json"
        target.write_text(text, encoding="utf-8")
        path.unlink()
        path.symlink_to(target)
        later(monkeypatch, 30)
        reads.clear()
        # A link is not read through (issue 38): the wait file was changed outside worker; the
        # link is set aside (as the link) and the recorded wait written back in its place.
        assert [record.EDITED in e for e in _scan(settings, store).errors] == [True]
        assert not path.is_symlink() and path.read_text(encoding="utf-8") == text
        assert (settings.wait_states / "rejected" / "w0.json").is_symlink()
        assert target.read_text(encoding="utf-8") == text
        assert _scan(settings, store).errors == []


def test_a_wait_file_changed_too_recently_is_read_on_every_run(
    settings: Settings, reads: list[str]
) -> None:
    """Its signature might not move if it changed again within the same clock tick."""
    with Store(settings.db_path) as store:
        save_approval_wait(settings, store, "w0")
        _scan(settings, store)
        _scan(settings, store)
    assert reads == ["w0.json", "w0.json"]


def test_a_wait_saved_again_is_read_again(
    settings: Settings, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saving a wait drops its record's signature, so a file equal to the old text is never
    taken for the new one."""
    with Store(settings.db_path) as store:
        save_approval_wait(settings, store, "w0")
        later(monkeypatch, 10)
        _scan(settings, store)
        save_approval_wait(settings, store, "w0", reason="again")
        row = store.db.execute("SELECT sig FROM wait_records WHERE file = 'w0.json'")
        assert row.fetchone()[0] is None
        later(monkeypatch, 20)
        reads.clear()
        scan = _scan(settings, store)
    assert (scan.pending, scan.errors, reads) == (1, [], ["w0.json"])
