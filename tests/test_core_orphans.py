"""Ending the agents that dead runs left running, and only those."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from worker.process.orphans import end_orphans, lapse_dead_claims, start_time
from worker.state.store import Store

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def sleeper() -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def test_an_orphan_of_a_dead_worker_is_ended(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    with Store(tmp_path / "w.db") as store:
        store.claim("t1", "inbox", "m", _dead_pid(), 600)
        store.note_agent("t1", sleeper.pid, start_time(sleeper.pid))
        assert end_orphans(store, "m") == ["t1"]
    assert sleeper.wait(timeout=10) is not None


def test_a_reused_pid_is_never_taken_for_the_agent(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """Same group id, but another process (another start time): left alone."""
    with Store(tmp_path / "w.db") as store:
        store.claim("t1", "inbox", "m", _dead_pid(), 600)
        store.note_agent("t1", sleeper.pid, "1")
        assert end_orphans(store, "m") == []
    assert sleeper.poll() is None


def test_the_agent_of_a_live_worker_or_another_machine_is_left_alone(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    with Store(tmp_path / "w.db") as store:
        store.claim("live", "inbox", "m", sleeper.pid, 600)  # its worker is alive
        store.note_agent("live", sleeper.pid, start_time(sleeper.pid))
        store.claim("other", "inbox", "elsewhere", _dead_pid(), 600)
        store.note_agent("other", sleeper.pid, start_time(sleeper.pid))
        assert end_orphans(store, "m") == []
    assert sleeper.poll() is None


def test_the_lease_of_a_dead_run_ends_now_and_only_that_one(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """A run killed (or lost with the machine) leaves its claim: its lease ends at once, so
    the task comes back in this run, not an hour later. A live holder, another machine's
    claim and a claim already over are left as they are."""
    with Store(tmp_path / "w.db") as store:
        store.claim("dead", "inbox", "m", _dead_pid(), 3600)
        store.claim("live", "inbox", "m", sleeper.pid, 3600)
        store.claim("other", "inbox", "elsewhere", _dead_pid(), 3600)
        assert lapse_dead_claims(store, "m") == ["dead"]
        assert [c["task_id"] for c in store.expired_claims()] == ["dead"]
        assert lapse_dead_claims(store, "m") == []  # once


def test_a_pid_used_again_after_a_restart_is_not_the_run_that_claimed(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """After a reboot the recorded pid may belong to a process started since the claim
    (here: the claim is dated before the sleeper started): the claim's run is gone."""
    with Store(tmp_path / "w.db") as store:
        store.claim("before-reboot", "inbox", "m", sleeper.pid, 3600)
        store.db.execute("UPDATE claims SET claimed_at = claimed_at - 600")
        store.db.commit()
        assert lapse_dead_claims(store, "m") == ["before-reboot"]
