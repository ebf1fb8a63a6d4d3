"""File names valid on Windows, folders with spaces and non-ASCII letters, and the platform's
shell for the maintenance commands."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.config import load_settings
from worker.errors import LockHeld
from worker.process.locking import workspace_lock
from worker.process.platform.names import portable_name, reserved, valid_on_windows
from worker.sources.fallback import run_checks
from worker.state.fsutil import atomic_write_text, json_files, read_text
from worker.waits.state import file_name

from .conftest import FakeAgent, run_worker, write_message

# The seeds' inbox lives on a Google Drive folder like this one.
DRIVE = ("Mon Drive", "Synchronisation été")


@pytest.mark.parametrize(
    "safe", ["msg-1", "maintenance-2026-11-26", "a.b_c-D", "console", "COM10", "lpt"]
)
def test_names_that_were_already_safe_do_not_change(safe: str) -> None:
    """Existing wait-state files keep their names: only ids Windows refuses are rewritten."""
    assert portable_name(safe) == safe
    assert file_name(safe) == f"{safe}.json"


@pytest.mark.parametrize(
    "task_id",
    ["CON", "con", "nul", "Com1", "LPT9", "aux.json", "a:b", "owner/name#12", "ends.", "sp ", ""],
)
def test_names_windows_refuses_are_rewritten_and_kept_apart(task_id: str) -> None:
    name = portable_name(task_id)
    assert valid_on_windows(name) and valid_on_windows(file_name(task_id))
    assert name != task_id
    assert len(name.rsplit("-", 1)[1]) == 8  # a hash of the id keeps `a:b` and `a_b` apart


def test_windows_device_names_are_recognised_with_any_extension() -> None:
    assert reserved("CON") and reserved("con.json") and reserved("Lpt1.log")
    assert not reserved("console") and not reserved("com10") and not reserved("icon")


@given(st.text(max_size=300), st.text(max_size=300))
def test_every_id_gets_a_short_windows_name_of_its_own(text: str, other: str) -> None:
    name = portable_name(text)
    assert valid_on_windows(name) and valid_on_windows(name + ".json")
    assert len(name) <= 110
    assert (name == portable_name(other)) == (text == other)


def test_atomic_writes_and_listings_work_under_spaces_and_accents(tmp_path: Path) -> None:
    folder = tmp_path.joinpath(*DRIVE) / "wait_states"
    atomic_write_text(folder / "été 1.json", '{"ok": true}')
    assert json_files(folder) == [folder / "été 1.json"]
    assert json.loads((folder / "été 1.json").read_text(encoding="utf-8")) == {"ok": True}


def test_a_full_run_in_a_synced_folder_with_an_id_windows_refuses(
    tmp_path: Path, fake_claude: FakeAgent
) -> None:
    """`worker run` in `…/Mon Drive/Synchronisation été/ws`, on a message whose id holds `:`
    and a device name: the task succeeds and the reply gets a name Windows accepts."""
    ws = tmp_path.joinpath(*DRIVE) / "ws"
    (ws / "inbox").mkdir(parents=True)
    write_message(ws, "msg-1", id="ask: CON?")
    env = {
        "WORKER_REVIEW__ENABLED": "false",
        "WORKER_INBOX": str(ws / "inbox"),  # the messages are written there (write_message)
        "WORKER_ALLOW_INBOX_IN_WORKSPACE": "true",
    }
    result = run_worker(ws, "run", env=env)
    assert result.returncode == 0, result.stderr
    (done,) = json_files(ws / "inbox" / "done")  # kept under its id, in a name Windows accepts
    assert valid_on_windows(done.name)
    assert json.loads(done.read_text(encoding="utf-8"))["id"] == "ask: CON?"
    replies = json_files(ws / "inbox" / "outbox")
    assert len(replies) == 1 and valid_on_windows(replies[0].name), replies
    assert json.loads(replies[0].read_text(encoding="utf-8"))["in_reply_to"] == "ask: CON?"


def test_maintenance_commands_run_through_the_shell_in_a_folder_with_spaces(
    tmp_path: Path,
) -> None:
    """Quotes, `&&` and a working folder with spaces and accents reach the shell intact."""
    cwd = tmp_path.joinpath(*DRIVE)
    cwd.mkdir(parents=True)
    python = f'"{sys.executable}"'
    commands = [
        f"{python} -c \"import os; print('in', ascii(os.path.basename(os.getcwd())))\"",
        f'{python} -c "print(1)" && {python} -c "import sys; sys.exit(3)"',
    ]
    settings = load_settings(cwd)  # the suite's: the sandbox off
    first, second = run_checks(
        commands, cwd, timeout_s=120, log_dir=tmp_path / "logs", settings=settings
    )
    assert first.ok and f"in {DRIVE[1]!a}" in first.output_tail  # any console encoding
    assert second.exit_code == 3 and "1" in second.output_tail
    assert (tmp_path / "logs" / "check-2.log").read_text(encoding="utf-8").strip() == "1"


def test_the_workspace_lock_holds_in_a_folder_with_spaces_and_accents(tmp_path: Path) -> None:
    """The OS lock (flock on POSIX, msvcrt.locking on Windows) under a synced-style path."""
    ws = tmp_path.joinpath(*DRIVE) / "ws"
    ws.mkdir(parents=True)
    settings = load_settings(ws)
    with workspace_lock(settings):
        held = subprocess.run(
            [sys.executable, "-c", LOCK_PROBE, str(ws)], capture_output=True, text=True
        )
        assert held.stdout.strip() == "held", held.stderr
        with pytest.raises(LockHeld), workspace_lock(load_settings(ws)):
            pass
    free = subprocess.run(
        [sys.executable, "-c", LOCK_PROBE, str(ws)], capture_output=True, text=True
    )
    assert free.stdout.strip() == "free", free.stderr


# Another process tries the workspace's lock and says what it found.
LOCK_PROBE = """
import sys
from pathlib import Path
from worker.config import load_settings
from worker.errors import LockHeld
from worker.process.locking import workspace_lock
try:
    with workspace_lock(load_settings(Path(sys.argv[1]))):
        print("free")
except LockHeld:
    print("held")
"""


def _path_read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return "<not UTF-8>"


def _fast_read_text(path: Path) -> str:
    try:
        return read_text(path)
    except UnicodeDecodeError:
        return "<not UTF-8>"


@given(st.binary(max_size=300) | st.text(alphabet="ab\r\né", max_size=40).map(str.encode))
def test_read_text_reads_any_file_as_path_read_text_does(content: bytes) -> None:
    """The idle run compares every wait-state file with its record through `fsutil.read_text`:
    its text (newlines `\\r\\n` and `\\r` read as `\\n`) and its refusal of a file that is
    not UTF-8 are `Path.read_text`'s, for any content."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "wait ét.json"
        path.write_bytes(content)
        assert _fast_read_text(path) == _path_read_text(path)
