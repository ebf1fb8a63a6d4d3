"""Atomic file writes and quarantine: nothing half-written, nothing bad silently lost."""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from stat import S_ISREG

log = logging.getLogger(__name__)

# On Windows a rename fails with PermissionError while another process (an antivirus scan, the
# search indexer, a sync client, a reader) has either file open; it passes a moment later. Git
# for Windows retries the same way, with growing delays. About 1.6 s in all, then the error.
_REPLACE_DELAYS_S = (0.02, 0.04, 0.08, 0.16, 0.32, 0.5, 0.5)
_Move = Callable[[Path | str, Path | str], None]  # os.replace, os.rename


def replace(source: Path | str, target: Path | str) -> None:
    """`os.replace`, retried a bounded number of times on Windows sharing violations."""
    _retried(os.replace, source, target)


def rename(source: Path | str, target: Path | str) -> None:
    """`os.rename` (on Windows it refuses an existing target: of two runs moving one file,
    one wins), with `replace`'s retry on sharing violations."""
    _retried(os.rename, source, target)


def _retried(move: _Move, source: Path | str, target: Path | str) -> None:
    for delay in (*_REPLACE_DELAYS_S, None):
        try:
            move(source, target)
            return
        except PermissionError:
            if delay is None or sys.platform != "win32":
                raise
            time.sleep(delay)


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_bytes(path: Path | str, dir_fd: int | None = None) -> bytes:
    """A whole file through the plain system calls: no `Path`, no buffered file object (the
    idle run reads every inbox message and every wait state this way). With `dir_fd` (see
    `opened_folder`), `path` is a name in that folder."""
    fd = os.open(path, _O_READ, dir_fd=dir_fd)
    try:
        raw = os.read(fd, _CHUNK)
        # Until end of file: a short read is not the end on every file system (FUSE, SMB).
        while chunk := os.read(fd, _CHUNK):
            raw += chunk
        return raw
    finally:
        os.close(fd)


def read_text(path: Path | str, dir_fd: int | None = None) -> str:
    """A UTF-8 text file as `Path.read_text` reads it (universal newlines: `\\r\\n` and `\\r`
    become `\\n`), at half its cost; OSError or UnicodeDecodeError as it raises them."""
    text = read_bytes(path, dir_fd).decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


# A link in its place is not read through (ELOOP): the agent can plant one where worker reads.
_O_READ = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
_CHUNK = 1 << 16

# A file's signature, exact: size, mtime, ctime, inode and mode. Two equal signatures, the
# first taken before a read of the file once it had settled, say that the file has not
# changed since that read (POSIX only: Windows' ctime is the creation time, which a rewrite
# leaves as it was):
# - ctime cannot be set by a program (`utime` sets it to now), so a file written again and put
#   back with its old mtime and size still has a new signature; a file replaced by a rename
#   has a new inode; a symbolic link (its target may change under it) is not a regular file;
# - a file last changed (mtime or ctime) within `SETTLE_NS` of the first signature is not
#   taken as settled: a rewrite within the same tick of the file system's clock (2 s for FAT's
#   mtime, a few ms for ctime on Linux) would leave its signature as it was.
SIGNATURE = struct.Struct("<QqqQI")
SETTLE_NS = 2_000_000_000


def signature(st: os.stat_result) -> bytes:
    """The signature of the file `st` describes (an `lstat`'s result)."""
    return SIGNATURE.pack(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


def settled(st: os.stat_result, now_ns: int) -> bool:
    """A regular file last changed more than `SETTLE_NS` before `now_ns`."""
    return S_ISREG(st.st_mode) and max(st.st_mtime_ns, st.st_ctime_ns) < now_ns - SETTLE_NS


@contextlib.contextmanager
def opened_folder(folder: Path) -> Iterator[int | None]:
    """`folder` open for reading its files by name (`dir_fd`): the system resolves one name
    per file instead of the whole path, and no `Path` is turned into a string (a thousand wait
    states read 1.9 ms faster). None where that is not supported (Windows) or the folder
    cannot be opened: read by path then."""
    try:
        fd = os.open(folder, os.O_RDONLY) if os.open in os.supports_dir_fd else None
    except OSError:
        fd = None
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


def json_files(folder: Path) -> list[Path]:
    """The `*.json` files of a folder (not hidden, not temporary), sorted; [] if it is missing."""
    try:
        with os.scandir(folder) as entries:
            names = [
                e.name
                for e in entries
                if e.name.endswith(".json")
                and not e.name.startswith(".")
                and (e.is_file() or e.is_symlink())  # a link: its reader sets it aside
            ]
    except OSError:
        return []
    # Sorted by name as Path sorts the files of one folder (case-blind on Windows), without
    # a Path comparison per step: a thousand waits took 8,600 of them.
    names.sort(key=str.lower if os.name == "nt" else None)
    return [folder / name for name in names]


def subfolders(folder: Path) -> list[Path]:
    """The folders of a folder (not hidden), sorted; [] if it is missing."""
    try:
        with os.scandir(folder) as entries:
            return sorted(
                Path(e.path)
                for e in entries
                if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)
            )
    except OSError:
        return []


def is_link(path: Path, what: str = "") -> bool:
    """Whether `path` is a symbolic link (or a Windows junction); says so in a warning when
    `what` names what worker was about to do there, which it then does not do through it."""
    linked = path.is_symlink() or (hasattr(path, "is_junction") and path.is_junction())
    if linked and what:
        log.warning("%s is a symbolic link: worker does not %s through it", path, what)
    return linked


def real_folder(folder: Path) -> Path:
    """`folder`, made if missing, as a folder of its own: a link in its place (the agent's,
    where it can write) is removed, never followed, and the folder made instead."""
    if is_link(folder, "write"):
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def quarantine(path: Path, folder: Path, reason: str) -> Path | None:
    """Move a bad file (the file itself: a link is moved as the link) into `folder` with a
    `.reason.txt` beside it; None if it vanished. A link in place of `folder` is not followed."""
    real_folder(folder)
    target = folder / path.name
    if target.exists():
        target = folder / f"{path.stem}.{int(time.time() * 1000)}{path.suffix}"
    try:
        replace(path, target)
    except FileNotFoundError:
        return None
    atomic_write_text(target.with_name(target.name + ".reason.txt"), reason.rstrip() + "\n")
    return target
