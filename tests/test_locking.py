"""The OS locks (`worker.process.locking`): the workspace's run lock and the supervisor's lock,
held by another process or by the same one, given back on release and when the holder dies."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from worker.config import load_settings
from worker.daemon.guard import single_supervisor
from worker.errors import LockHeld
from worker.process.locking import held, held_in_turn, workspace_lock

# Holds the lock of argv[1] until its stdin closes or it is killed; says "locked" first.
HOLDER = """
import sys
from pathlib import Path
from worker.process.locking import held
with held(Path(sys.argv[1]), "busy"):
    print("locked", flush=True)
    sys.stdin.read()
"""


def _holder(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_a_lock_another_process_holds_is_refused_at_once_with_the_callers_message(
    tmp_path: Path,
) -> None:
    path = tmp_path / "x.lock"
    proc = _holder(path)
    try:
        with (
            pytest.raises(LockHeld, match=r"^someone else has it$"),
            held(path, "someone else has it"),
        ):
            pytest.fail("the lock was taken while another process held it")
    finally:
        proc.communicate("")
    with held(path, "busy"):  # released with its holder's block
        assert path.exists()
    assert path.exists()  # the file stays: a later holder locks the same file


def test_the_os_gives_the_lock_back_when_its_holder_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    proc = _holder(path)
    proc.kill()
    proc.communicate()
    with held(path, "busy"):
        pass


def test_a_second_hold_in_the_same_process_is_refused_and_the_first_survives_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "x.lock"
    with held(path, "busy"):
        with pytest.raises(LockHeld), held(path, "busy"):
            pass
        # The refused attempt closed only its own descriptor: the first hold still holds.
        probe = subprocess.run(
            [sys.executable, "-c", HOLDER, str(path)], input="", capture_output=True, text=True
        )
        assert "LockHeld" in probe.stderr and probe.returncode != 0


def test_the_workspace_lock_says_whose_lock_it_is_by_default(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    settings = load_settings(ws)
    with workspace_lock(settings):
        with pytest.raises(LockHeld) as caught, workspace_lock(settings):
            pass
        assert str(caught.value) == (
            f"another worker run holds the lock of {settings.workspace}; try again later"
        )
        with (
            pytest.raises(LockHeld, match=r"^waits are busy$"),
            workspace_lock(settings, "waits are busy"),
        ):
            pass
    assert (settings.state / "run.lock").is_file()


def test_one_supervisor_per_workspace_names_its_lock_file(tmp_path: Path) -> None:
    with (
        single_supervisor(tmp_path),
        pytest.raises(LockHeld) as caught,
        single_supervisor(tmp_path),
    ):
        pass
    lock = tmp_path / "daemon" / "supervise.lock"
    assert str(caught.value) == (
        f"another worker supervise is running for this workspace ({lock} is locked);"
        " `worker supervise status` shows it"
    )
    with single_supervisor(tmp_path):  # given back when the first one ended
        pass


def test_a_lock_file_that_cannot_be_opened_is_an_os_error_not_a_held_lock(
    tmp_path: Path,
) -> None:
    with pytest.raises(OSError) as caught, held(tmp_path / "missing" / "x.lock", "busy"):
        pass
    assert not isinstance(caught.value, LockHeld)


def test_a_lock_taken_in_turn_waits_for_its_holder_and_is_then_held(tmp_path: Path) -> None:
    """`held_in_turn` (the reviewers between slots' tasks) waits while another process holds
    the lock, rather than failing, and holds it once that process lets it go."""
    import threading

    from worker.process.locking import held_in_turn

    path = tmp_path / "review.lock"
    proc = _holder(path)
    entered, leave = threading.Event(), threading.Event()

    def take() -> None:
        with held_in_turn(path, poll_s=0.01):
            entered.set()
            leave.wait()

    thread = threading.Thread(target=take)
    thread.start()
    assert not entered.wait(0.3)  # still waiting for the holder
    proc.communicate("")
    assert entered.wait(60)
    with pytest.raises(LockHeld), held(path, "busy"):
        pass
    leave.set()
    thread.join()


def test_a_lock_waited_for_is_taken_when_its_holder_lets_go_and_refused_past_the_wait(
    tmp_path: Path,
) -> None:
    """`held_in_turn` with `wait_s`: taken once the other process releases it; LockHeld with
    the caller's words when it is still held after `wait_s`."""
    path = tmp_path / "x.lock"
    proc = _holder(path)
    with (
        pytest.raises(LockHeld, match=r"^still busy$"),
        held_in_turn(path, poll_s=0.01, wait_s=0.2, busy="still busy"),
    ):
        pytest.fail("the lock was taken while another process held it")
    threading.Timer(0.3, proc.communicate, args=("",)).start()  # lets go while we wait
    with held_in_turn(path, poll_s=0.01, wait_s=600, busy="busy"):
        assert proc.wait() == 0


def test_ending_a_wait_waits_for_a_slots_scheduling_but_not_for_a_whole_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With slots a run holds the workspace lock only while it schedules: `waits cancel`,
    `adopt` and `prune` then wait for it; with one slot a run holds it for its whole task,
    and they are refused at once (exit 75), as before."""
    from worker.waits import service

    ws = tmp_path / "ws"
    ws.mkdir()
    settings = load_settings(ws)
    settings.state.mkdir(parents=True, exist_ok=True)
    proc = _holder(settings.state / "run.lock")
    try:
        with pytest.raises(LockHeld, match="try again when it ends"), service._run_lock(settings):
            pytest.fail("taken while a run held the workspace")
    finally:
        proc.communicate("")
    monkeypatch.setenv("WORKER_MAX_PARALLEL", "3")
    slots = load_settings(ws)
    proc = _holder(slots.state / "run.lock")
    threading.Timer(0.3, proc.communicate, args=("",)).start()  # the slot's run has claimed
    with service._run_lock(slots) as store:
        assert proc.wait() == 0 and tuple(store.db.execute("SELECT 1").fetchone()) == (1,)
