"""The shared inbox read: one read per run however long it takes, names sorted as names,
messages for other machines never parsed, and files that are not messages named."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from worker.sources import message as inbox_read
from worker.sources.message import addressed_messages


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    inbox_read._cache.clear()


def _drop(folder: Path, name: str, to: str, **extra: object) -> Path:
    path = folder / name
    path.write_text(json.dumps({"id": path.stem, "from": "x", "to": to, **extra}))
    return path


def test_a_read_longer_than_the_cache_age_is_still_reused_by_the_other_readers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cliff: the cache's age counted from before the read, so a read over 2 s made every
    later reader of the same run read the whole folder again."""
    for n in range(5):
        _drop(tmp_path, f"m{n}.json", "me")
    now = [100.0]
    reads = []
    real_read = inbox_read._read_addressed

    def slow_read(
        folder: Path, machine_id: str, index: object = None
    ) -> list[inbox_read.InboxEntry]:
        reads.append(folder)
        now[0] += 10.0  # the read took ten seconds
        return real_read(folder, machine_id)

    monkeypatch.setattr(inbox_read, "_clock", lambda: now[0])
    monkeypatch.setattr(inbox_read, "_read_addressed", slow_read)
    first = addressed_messages(tmp_path, "me")
    now[0] += 0.5
    assert addressed_messages(tmp_path, "me") is first
    assert len(reads) == 1
    now[0] += inbox_read._CACHE_MAX_AGE_S  # later than the maximum age: read again
    addressed_messages(tmp_path, "me")
    assert len(reads) == 2


def test_a_new_file_in_the_folder_is_seen_at_once(tmp_path: Path) -> None:
    _drop(tmp_path, "a.json", "me")
    assert [e.path.name for e in addressed_messages(tmp_path, "me")] == ["a.json"]
    _drop(tmp_path, "b.json", "me")
    os.utime(tmp_path, ns=(1, 1))  # a folder mtime that surely differs from the cached one
    assert [e.path.name for e in addressed_messages(tmp_path, "me")] == ["a.json", "b.json"]


def test_entries_come_in_file_name_order_other_files_first(tmp_path: Path) -> None:
    for name in ("b10.json", "b2.json", "a.json", "B.json"):
        _drop(tmp_path, name, "all")
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "upload.json.part").write_text("{")  # still being written: not ours
    (tmp_path / ".hidden.json").write_text("{")
    entries = addressed_messages(tmp_path, "me")
    expected = sorted(["b10.json", "b2.json", "a.json", "B.json"], key=lambda n: Path(n))
    assert [e.path.name for e in entries] == ["notes.txt", *expected]
    assert entries[0].message is None and "not a message" in (entries[0].error or "")
    assert entries[0].path == tmp_path / "notes.txt"


def test_only_messages_that_may_concern_this_machine_are_parsed_and_bad_ones_are_named(
    tmp_path: Path,
) -> None:
    _drop(tmp_path, "mine.json", "me")
    _drop(tmp_path, "everyone.json", "all")
    _drop(tmp_path, "other.json", "someone-else")
    (tmp_path / "broken.json").write_text('{"id": "broken", "to": "me"')  # cut short
    (tmp_path / "list.json").write_text('  ["me"]')
    (tmp_path / "other-broken.json").write_text('{"to": "someone-else", ')
    (tmp_path / "padded.json").write_text('\n  {"id": "padded", "from": "x", "to": "me"}')
    found = {e.path.name: e for e in addressed_messages(tmp_path, "me")}
    assert set(found) == {"mine.json", "everyone.json", "broken.json", "list.json", "padded.json"}
    assert found["mine.json"].message is not None and found["mine.json"].message.to == "me"
    assert found["padded.json"].message is not None
    assert "invalid message" in (found["broken.json"].error or "")
    assert "not JSON" in (found["list.json"].error or "")


def test_a_message_larger_than_one_read_is_read_whole(tmp_path: Path) -> None:
    body = "x" * 200_000
    _drop(tmp_path, "big.json", "me", body=body)
    (entry,) = addressed_messages(tmp_path, "me")
    assert entry.message is not None and entry.message.body == body


def test_a_missing_folder_has_no_messages(tmp_path: Path) -> None:
    assert addressed_messages(tmp_path / "nowhere", "me") == []


def test_a_message_rewritten_in_place_with_its_size_and_mtime_is_read_anew_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No index keyed by name, size and mtime: every run reads every file (only the parse is
    skipped for other machines' messages), so a change that keeps size and mtime is seen."""
    path = _drop(tmp_path, "m.json", "someone-else")
    stat, folder = path.stat(), tmp_path.stat()
    now = [0.0]
    monkeypatch.setattr(inbox_read, "_clock", lambda: now[0])
    assert addressed_messages(tmp_path, "me") == []
    same_size = path.read_text().replace('"someone-else"', '"all"' + " " * 9)
    fd = os.open(path, os.O_WRONLY)  # in place: same inode, same length
    os.write(fd, same_size.encode())
    os.close(fd)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.utime(tmp_path, ns=(folder.st_atime_ns, folder.st_mtime_ns))
    assert path.stat().st_size == stat.st_size
    now[0] += inbox_read._CACHE_MAX_AGE_S  # the next run (or this one, a moment later)
    (entry,) = addressed_messages(tmp_path, "me")
    assert entry.message is not None and entry.message.to == "all"
