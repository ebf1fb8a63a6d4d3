"""The platform module's process control, through its interface, with psutil for real.

The grandchild tests are the holdout case: an agent's own children (node's shells, test
runners) must end with it. The orphan and tree tests also run with `sys.platform` faked as
`darwin`, which proves that the code reads no /proc of its own: psutil and POSIX calls only.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from worker.process.orphans import end_orphans
from worker.process.platform import process
from worker.process.platform.process import TreeProcess, alive, same_process, start_time
from worker.process.proc import run_process
from worker.state.store import Store

POSIX = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups and sessions")

# A parent that starts a sleeping grandchild, writes its pid to argv[1], and sleeps too.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
with open(sys.argv[1], "w") as f:
    f.write(str(child.pid))
time.sleep(120)
"""
# The same, but the grandchild leaves the group (setsid), as daemonising tools do.
PARENT_ESCAPING = PARENT.replace(
    "subprocess.Popen([", "subprocess.Popen(start_new_session=True, args=["
)


@pytest.fixture(params=["native", "darwin"])
def platform_name(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs on this system, then again with sys.platform faked as macOS's."""
    if request.param == "darwin":
        if sys.platform == "win32":
            pytest.skip("faking macOS needs POSIX calls underneath")
        monkeypatch.setattr(sys, "platform", "darwin")
    return str(request.param)


def _wait_for(predicate: object, what: str, timeout: float = 20.0) -> None:
    # A bound on waiting for the system, not a speed assertion: the test fails only if the
    # event never comes.
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _read_pid(path: Path) -> int:
    _wait_for(lambda: path.exists() and path.read_text().strip(), f"{path.name} to be written")
    return int(path.read_text())


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A parent in its own session and its sleeping grandchild (pid), ended afterwards."""
    pid_file = tmp_path / "grandchild.pid"
    parent: TreeProcess[bytes] = TreeProcess([sys.executable, "-c", PARENT, str(pid_file)])
    grandchild = _read_pid(pid_file)
    yield parent, grandchild
    for pid in (grandchild, parent.pid):
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
    parent.wait()


def test_no_proc_parsing_or_bare_killpg_outside_the_platform_module() -> None:
    """No /proc parsing outside the platform module: /proc, os.killpg and os.kill(pid, 0)
    (which terminates the process on Windows) appear in worker/process/platform/ only."""
    package = Path(process.__file__).parents[1]
    pattern = re.compile(r"[\"']/proc\b|\bkillpg\(|os\.kill\([^)]*,\s*0\)")
    offenders = [
        f"{path.relative_to(package)}:{number}"
        for path in package.rglob("*.py")
        if "platform" not in path.relative_to(package).parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line.split("#", 1)[0])
        and '"--proc", "/proc"' not in line  # bubblewrap mounts a new /proc: no parsing
    ]
    assert offenders == []


def test_stopping_an_agent_ends_its_sleeping_grandchild(tmp_path: Path, platform_name: str) -> None:
    """The holdout case through the process chokepoint: a stop ends the agent's whole tree."""
    pid_file = tmp_path / "grandchild.pid"
    stop = threading.Event()
    grandchild: list[int] = []

    def stop_once_started() -> None:
        grandchild.append(_read_pid(pid_file))
        stop.set()

    starter = threading.Thread(target=stop_once_started)
    starter.start()
    result = run_process(
        [sys.executable, "-c", PARENT, str(pid_file)], cwd=tmp_path, timeout_s=600, stop=stop
    )
    starter.join()
    assert result.stopped == "stop requested"
    _wait_for(lambda: _gone(grandchild[0]), "the grandchild to end")


def test_ending_a_tree_ends_a_grandchild_that_left_the_group(tmp_path: Path) -> None:
    """psutil finds descendants that moved to a session of their own before the first signal."""
    if sys.platform == "win32":
        pytest.skip("setsid is POSIX; on Windows the job holds every descendant")
    pid_file = tmp_path / "grandchild.pid"
    proc: TreeProcess[str] = TreeProcess(
        [sys.executable, "-c", PARENT_ESCAPING, str(pid_file)], text=True
    )
    grandchild = _read_pid(pid_file)
    assert os.getpgid(grandchild) != proc.pid
    proc.end_tree(grace_s=1.0)
    assert proc.wait() is not None
    _wait_for(lambda: _gone(grandchild), "the escaped grandchild to end")


@POSIX
def test_a_tree_process_leads_its_own_group(platform_name: str) -> None:
    proc: TreeProcess[bytes] = TreeProcess([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)
        assert proc.job is None
    finally:
        proc.end_tree(grace_s=0)
        proc.wait()


def test_asking_the_leader_lets_it_stop_itself(tmp_path: Path, platform_name: str) -> None:
    """`ask_leader` is the polite request: a child that handles it exits on its own."""
    ready = tmp_path / "ready"
    script = (
        "import signal, sys, time\n"
        "signal.signal(getattr(signal, 'SIGBREAK', signal.SIGTERM), lambda *a: sys.exit(7))\n"
        f"open({str(ready)!r}, 'w').close()\n"
        "time.sleep(60)\n"
    )
    proc: TreeProcess[bytes] = TreeProcess([sys.executable, "-c", script])
    _wait_for(ready.exists, "the child's handler")
    proc.ask_leader()
    assert proc.wait(timeout=30) == 7


def test_start_times_tell_a_process_from_a_recycled_pid(
    tree: tuple[subprocess.Popen[bytes], int], platform_name: str
) -> None:
    parent, _ = tree
    started = start_time(parent.pid)
    assert started is not None
    assert same_process(parent.pid, started)
    assert not same_process(parent.pid, repr(float(started) - 3600))  # an older process
    assert not same_process(parent.pid, "12345")  # a tick count from an older worker
    assert not same_process(_dead_pid(), started)
    assert start_time(_dead_pid()) is None


@POSIX
def test_alive_counts_zombies_as_dead(platform_name: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    _wait_for(lambda: _gone(child.pid), "the child to exit")
    assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE  # not reaped yet
    assert not alive(child.pid)
    child.wait()
    assert not alive(child.pid)
    assert alive(os.getpid())


@POSIX
def test_an_orphan_group_whose_leader_died_is_still_found_and_ended(
    tmp_path: Path, tree: tuple[subprocess.Popen[bytes], int], platform_name: str
) -> None:
    """The agent's leader is gone, its grandchild still runs in the group: it is ended."""
    parent, grandchild = tree
    started = start_time(parent.pid)
    assert started is not None
    parent.kill()
    parent.wait()
    assert process.orphan_group(parent.pid, started)
    with Store(tmp_path / "w.db") as store:
        store.claim("t1", "inbox", "m", _dead_pid(), 600)
        store.note_agent("t1", parent.pid, started)
        assert end_orphans(store, "m") == ["t1"]
    _wait_for(lambda: _gone(grandchild), "the orphaned grandchild to end")
    assert not process.group_running(parent.pid)


@POSIX
def test_an_orphan_agent_and_its_grandchild_are_ended(
    tmp_path: Path, tree: tuple[subprocess.Popen[bytes], int], platform_name: str
) -> None:
    parent, grandchild = tree
    with Store(tmp_path / "w.db") as store:
        store.claim("t1", "inbox", "m", _dead_pid(), 600)
        store.note_agent("t1", parent.pid, start_time(parent.pid))
        assert end_orphans(store, "m") == ["t1"]
    assert parent.wait(timeout=30) is not None
    _wait_for(lambda: _gone(grandchild), "the grandchild to end")


@POSIX
def test_a_recycled_pid_or_a_live_worker_keeps_the_group_alive(
    tmp_path: Path, tree: tuple[subprocess.Popen[bytes], int], platform_name: str
) -> None:
    parent, grandchild = tree
    with Store(tmp_path / "w.db") as store:
        store.claim("reused", "inbox", "m", _dead_pid(), 600)
        store.note_agent("reused", parent.pid, repr(float(start_time(parent.pid) or 0) - 3600))
        store.claim("live", "inbox", "m", parent.pid, 600)  # its worker is alive
        store.note_agent("live", parent.pid, start_time(parent.pid))
        store.claim("other", "inbox", "elsewhere", _dead_pid(), 600)
        store.note_agent("other", parent.pid, start_time(parent.pid))
        assert end_orphans(store, "m") == []
    assert parent.poll() is None
    assert not _gone(grandchild)


# A stand-in for worker: starts an agent (with a sleeping grandchild) through the platform
# module, writes the grandchild's pid, and waits to be killed.
WORKER = f"""
import sys, time
from worker.process.platform.process import TreeProcess
agent = TreeProcess([sys.executable, "-c", {PARENT!r}, sys.argv[1]])
time.sleep(600)
"""


@pytest.mark.skipif(sys.platform != "win32", reason="Job Objects exist on Windows only")
def test_on_windows_the_job_ends_the_agent_tree_when_worker_is_killed(tmp_path: Path) -> None:
    """Kill-on-close: TerminateProcess on worker closes its job handle, and the system ends
    the agent and its grandchild; no orphan is left for the next run."""
    pid_file = tmp_path / "grandchild.pid"
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(pid_file)])
    grandchild = _read_pid(pid_file)
    assert not _gone(grandchild)
    worker.kill()
    worker.wait()
    _wait_for(lambda: _gone(grandchild), "the job to end the grandchild")
