"""The inbox read's index (`worker.sources.inbox_index`): a file for another machine is read
once and then skipped while unchanged; a file changed in place (even within the same second,
the same size and its mtime put back), replaced, removed, or changed too recently to be sure
of is read again; so the index never makes a message for this machine be missed, nor one be
taken twice."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import FakeAgent, needs_posix, state_of, write_message
from worker.config import load_settings
from worker.run.runner import RunOptions, run_once
from worker.sources import inbox_index
from worker.sources import message as inbox_read
from worker.sources.message import addressed_messages
from worker.state.fsutil import SETTLE_NS
from worker.state.store import Store

pytestmark = needs_posix("the index is kept on POSIX only (ctime is a change time there)")


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    inbox_read._cache.clear()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files the inbox read opens, in order."""
    opened: list[str] = []
    real = inbox_read.read_bytes

    def counting(path: Path | str) -> bytes:
        opened.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(inbox_read, "read_bytes", counting)
    return opened


def later(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The reads from now on happen `seconds` after the files were last written."""
    monkeypatch.setattr(inbox_index, "_now_ns", lambda: time.time_ns() + int(seconds * 1e9))


def _message(folder: Path, name: str, to: str, body: str = "b" * 50) -> Path:
    path = folder / name
    path.write_text(json.dumps({"id": path.stem, "from": "x", "to": to, "body": body}))
    return path


def _read(folder: Path, store: Store, me: str = "me") -> list[str]:
    inbox_read._cache.clear()  # every call is a run of its own
    return [e.path.name for e in addressed_messages(folder, me, store)]


def _rows(store: Store) -> int:
    return int(store.db.execute("SELECT COUNT(*) FROM inbox_index").fetchone()[0])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "state" / "worker.db") as opened:
        yield opened


@pytest.fixture
def inbox(tmp_path: Path) -> Path:
    folder = tmp_path / "inbox"
    folder.mkdir()
    return folder


def test_a_file_for_another_machine_is_read_once_then_skipped_while_unchanged(
    inbox: Path, store: Store, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _message(inbox, "other.json", "machine-2")
    _message(inbox, "mine.json", "me")
    later(monkeypatch, 10)
    assert _read(inbox, store) == ["mine.json"]
    assert sorted(reads) == ["mine.json", "other.json"]
    reads.clear()
    assert _read(inbox, store) == ["mine.json"]
    assert reads == ["mine.json"]  # ours is read on every run; the other file no more
    assert _rows(store) == 1


def test_a_file_rewritten_in_place_with_the_same_size_and_mtime_is_read_again(
    inbox: Path, store: Store, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within the same tick, as far as mtime can tell: ctime (which no program can set back)
    and the inode show the change."""
    path = _message(inbox, "m.json", "machine-2")
    later(monkeypatch, 10)
    assert _read(inbox, store) == []
    before = path.stat()
    text = path.read_text().replace('"machine-2"', '"me"' + " " * 7)
    assert len(text) == before.st_size
    with path.open("r+") as handle:  # in place: the same inode
        handle.write(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    later(monkeypatch, 20)
    assert _read(inbox, store) == ["m.json"]


def test_a_file_replaced_by_a_rename_is_read_again(
    inbox: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _message(inbox, "m.json", "machine-2")
    later(monkeypatch, 10)
    assert _read(inbox, store) == []
    before = path.stat()
    new = _message(inbox.parent, "m.json", "me", body="b" * 57)  # the same size
    assert new.stat().st_size == before.st_size
    os.utime(new, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(new, path)
    assert _read(inbox, store) == ["m.json"]


def test_a_file_changed_too_recently_is_not_remembered_and_is_read_on_every_run(
    inbox: Path, store: Store, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its signature might not move if it changed again within the same clock tick."""
    path = _message(inbox, "m.json", "machine-2")
    changed_ns = max(path.stat().st_mtime_ns, path.stat().st_ctime_ns)
    # Every read happens half the settling time after the file's last change.
    monkeypatch.setattr(inbox_index, "_now_ns", lambda: changed_ns + SETTLE_NS // 2)
    assert _read(inbox, store) == []
    assert _read(inbox, store) == []
    assert reads == ["m.json", "m.json"] and _rows(store) == 0
    later(monkeypatch, 10)
    _read(inbox, store)
    assert _rows(store) == 1


def test_a_removed_file_is_forgotten_and_a_new_one_of_the_same_name_is_read(
    inbox: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _message(inbox, "m.json", "machine-2")
    _message(inbox, "n.json", "machine-3")
    later(monkeypatch, 10)
    _read(inbox, store)
    assert _rows(store) == 2
    path.unlink()
    assert _read(inbox, store) == []
    assert _rows(store) == 1
    _message(inbox, "m.json", "all")
    assert _read(inbox, store) == ["m.json"]


def test_the_index_is_kept_per_machine_id(
    inbox: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _message(inbox, "m.json", "machine-2")
    later(monkeypatch, 10)
    assert _read(inbox, store, me="me") == []
    assert _read(inbox, store, me="machine-2") == ["m.json"]  # another id reads it again


def test_files_remembered_under_another_mentions_rule_are_read_again(
    inbox: Path, store: Store, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker whose idea of "mentions this machine" changed does not trust what an older
    rule remembered as not ours."""
    _message(inbox, "m.json", "machine-2")
    later(monkeypatch, 10)
    _read(inbox, store)
    reads.clear()
    monkeypatch.setattr(inbox_index, "MENTIONS_RULE", "id-alias-or-all/2")
    assert _read(inbox, store) == []
    assert reads == ["m.json"]


def test_a_symbolic_link_is_listed_never_read_nor_remembered(
    inbox: Path, store: Store, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link in the inbox is never read through (whoever wrote it chose where it points): it
    is listed as an odd entry, left alone, and the index remembers nothing of it, whatever
    its target says."""
    target = _message(inbox.parent, "target.json", "machine-2")
    (inbox / "link.json").symlink_to(target)
    later(monkeypatch, 10)
    [entry] = addressed_messages(inbox, "me", store)
    assert entry.odd and entry.message is None and "symbolic link" in (entry.error or "")
    target.write_text(json.dumps({"id": "link", "from": "x", "to": "me"}))
    inbox_read._cache.clear()
    [entry] = addressed_messages(inbox, "me", store)
    assert entry.odd and entry.message is None
    assert reads == [] and _rows(store) == 0


def test_without_a_store_or_with_a_broken_index_every_file_is_read(
    inbox: Path, store: Store, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _message(inbox, "m.json", "machine-2")
    later(monkeypatch, 10)
    _read(inbox, store)
    inbox_read._cache.clear()
    assert addressed_messages(inbox, "me") == []  # a dry run: no store
    store.db.execute("DROP TABLE inbox_index")  # its migration is recorded: it stays gone
    assert _read(inbox, store) == []
    assert reads == ["m.json", "m.json", "m.json"]


def test_a_run_takes_a_message_rewritten_for_it_once_and_never_again(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end: idle runs remember the files for others; a file rewritten in place for
    this machine (same size, mtime put back) is taken by the next run, and only once."""
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    for n in range(5):
        write_message(workspace, f"m{n}", to="machine-0002")  # as long as our id
    later(monkeypatch, 10)
    settings = load_settings(workspace)
    assert run_once(settings, RunOptions()).outcome.value == "idle"
    with Store(state_of(workspace) / "worker.db") as db:
        assert _rows(db) == 5
    path = workspace / "inbox" / "m3.json"
    before = path.stat()
    text = path.read_text(encoding="utf-8").replace('"machine-0002"', '"test-machine"')
    with path.open("r+", encoding="utf-8") as handle:  # in place, the same size
        handle.write(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_ino) == (before.st_size, before.st_ino)
    inbox_read._cache.clear()
    report = run_once(settings, RunOptions())
    assert (report.outcome.value, report.task_id) == ("success", "m3")
    inbox_read._cache.clear()
    assert run_once(settings, RunOptions()).outcome.value == "idle"
    assert len(fake_claude.task_calls) == 1


def _scopes(store: Store) -> list[str]:
    rows = store.db.execute("SELECT scope FROM inbox_scopes ORDER BY id").fetchall()
    return [row[0].split("\n")[-1] for row in rows]  # the folder of each scope


def _age_scopes(store: Store, seconds: float) -> None:
    with store.transaction() as db:
        db.execute("UPDATE inbox_scopes SET used_at = used_at - ?", (seconds,))


def test_the_rows_of_a_folder_no_run_reads_any_more_are_forgotten_after_a_week(
    tmp_path: Path, inbox: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An inbox folder given up (or a machine id, or an older mentions rule) keeps its rows
    for `STALE_S`; then the daily run that notes another scope still in use deletes them.
    The scope being read stays, however long it was not read before."""
    other = tmp_path / "old-inbox"
    other.mkdir()
    _message(other, "a.json", "machine-2")
    _message(inbox, "b.json", "machine-2")
    later(monkeypatch, 10)
    _read(other, store)
    _read(inbox, store)
    assert _scopes(store) == [str(other), str(inbox)] and _rows(store) == 2
    _age_scopes(store, inbox_index.STALE_S - 3600)  # both read just under a week ago
    _read(inbox, store)
    assert _scopes(store) == [str(other), str(inbox)] and _rows(store) == 2
    _age_scopes(store, 86400 + 60)  # a day later: over a week for the old folder
    _read(inbox, store)
    assert _scopes(store) == [str(inbox)] and _rows(store) == 1
    _age_scopes(store, 30 * 86400)  # a machine switched off for a month keeps its own
    _read(inbox, store)
    assert _scopes(store) == [str(inbox)] and _rows(store) == 1


def test_a_scope_forgotten_by_another_run_while_this_one_reads_leaves_no_rows_behind(
    inbox: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of a scope unread for over a week, while another run forgets that scope: what
    it remembers goes under the scope's new number, and no row is left under the old one for
    a later scope to inherit (a new machine id would skip a file addressed to it)."""
    _message(inbox, "m.json", "machine-2")
    later(monkeypatch, 10)
    _read(inbox, store, me="b")
    _read(inbox, store, me="a")
    with store.transaction() as db:  # b last read over a week ago
        db.execute("UPDATE inbox_scopes SET used_at = 0 WHERE scope LIKE '%' || char(10) || 'b%'")
    _message(inbox, "new.json", "d")
    b_run = inbox_index.IndexedRead(store, inbox, "b")  # b's run has its number, and reads
    with os.scandir(inbox) as entries:
        for entry in b_run.unread(entries):
            b_run.for_others(entry.name)
    a_run = inbox_index.IndexedRead(store, inbox, "a")
    a_run.used_at = 0.0  # a's daily note of its own use, which forgets b
    a_run.save()
    a_run.close()
    b_run.save()
    b_run.close()
    ids = {row[0] for row in store.db.execute("SELECT id FROM inbox_scopes")}
    assert b_run.scope_id in ids
    assert {row[0] for row in store.db.execute("SELECT scope FROM inbox_index")} <= ids
    assert _read(inbox, store, me="d") == ["new.json"]  # a new scope inherits nothing


def test_a_scope_in_use_records_it_once_a_day_not_on_every_run(
    inbox: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _message(inbox, "m.json", "machine-2")
    later(monkeypatch, 10)
    _read(inbox, store)
    (first,) = store.db.execute("SELECT used_at FROM inbox_scopes").fetchone()
    _read(inbox, store)
    assert store.db.execute("SELECT used_at FROM inbox_scopes").fetchone()[0] == first
    _age_scopes(store, 86400 + 60)
    _read(inbox, store)
    assert store.db.execute("SELECT used_at FROM inbox_scopes").fetchone()[0] > first


def test_an_index_of_the_first_version_is_dropped_and_built_again(
    inbox: Path, tmp_path: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database indexed by an older worker (rows keyed by the scope's text) upgrades: its
    rows go, every file is read once more, then remembered under the new keys."""
    with Store(tmp_path / "old.db") as old:
        old.ensure("inbox_index", inbox_index.MIGRATIONS[:1])
        with old.transaction() as db:
            db.execute(
                "INSERT INTO inbox_index(scope, name, sig) VALUES (?, ?, ?)",
                (f"id-or-all/1\nme\n{inbox}", "m.json", b"\0" * 32),
            )
    _message(inbox, "m.json", "machine-2")
    later(monkeypatch, 10)
    with Store(tmp_path / "old.db") as upgraded:
        assert _read(inbox, upgraded) == []
        assert _read(inbox, upgraded) == []
        assert _rows(upgraded) == 1
    assert reads == ["m.json"]
