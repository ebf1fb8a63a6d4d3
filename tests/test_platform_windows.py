"""The Windows branches, run here with `sys.platform` faked as `win32` and the OS calls faked
where running them is impossible (kernel32, CTRL_BREAK_EVENT); psutil stays real. The GitHub
Actions matrix (.github/workflows/ci.yml) runs the rest of the suite on a real Windows."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from worker.daemon.child import Child
from worker.process.platform import process, winjob
from worker.process.platform.process import TreeProcess
from worker.process.platform.shell import COMMAND_VARIABLE, shell_command
from worker.state import fsutil

NOT_WINDOWS = pytest.mark.skipif(
    sys.platform == "win32", reason="fakes Windows on a POSIX system underneath"
)


class FakeKernel32:
    """Records the kernel32 calls of worker/process/platform/winjob.py; `fail` names a call that
    returns 0 (failure), as kernel32 does."""

    def __init__(self, fail: str = "") -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail = fail
        self.limit_flags: int | None = None
        self.info_size: int | None = None

    def _ret(self, name: str, value: int) -> int:
        return 0 if self.fail == name else value

    def CreateJobObjectW(self, attributes: Any, name: Any) -> int:
        self.calls.append(("CreateJobObjectW", attributes, name))
        return self._ret("CreateJobObjectW", 100)

    def SetInformationJobObject(self, job: int, info_class: int, address: int, size: int) -> int:
        self.calls.append(("SetInformationJobObject", job, info_class))
        limits = winjob.ExtendedLimits.from_address(address)
        self.limit_flags = limits.BasicLimitInformation.LimitFlags
        self.info_size = size
        return self._ret("SetInformationJobObject", 1)

    def OpenProcess(self, access: int, inherit: bool, pid: int) -> int:
        self.calls.append(("OpenProcess", access, inherit, pid))
        return self._ret("OpenProcess", 200)

    def AssignProcessToJobObject(self, job: int, handle: int) -> int:
        self.calls.append(("AssignProcessToJobObject", job, handle))
        return self._ret("AssignProcessToJobObject", 1)

    def TerminateJobObject(self, job: int, code: int) -> int:
        self.calls.append(("TerminateJobObject", job, code))
        return 1

    def CloseHandle(self, handle: int) -> int:
        self.calls.append(("CloseHandle", handle))
        return 1

    def names(self) -> list[str]:
        return [call[0] for call in self.calls]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # some inits never reap
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def test_the_job_is_kill_on_close_and_holds_the_process() -> None:
    api = FakeKernel32()
    job = winjob.Job(api)
    job.assign(4242)
    assert api.limit_flags == winjob.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    assert api.calls[1] == ("SetInformationJobObject", 100, 9)  # JobObjectExtendedLimitInformation
    access = winjob.PROCESS_SET_QUOTA | winjob.PROCESS_TERMINATE
    assert api.calls[2:] == [
        ("OpenProcess", access, False, 4242),
        ("AssignProcessToJobObject", 100, 200),
        ("CloseHandle", 200),  # the process handle, not the job's
    ]
    job.terminate()
    job.close()
    job.close()
    assert api.calls[-2:] == [("TerminateJobObject", 100, 1), ("CloseHandle", 100)]


def test_the_limit_structure_has_the_documented_size() -> None:
    """sizeof(JOBOBJECT_EXTENDED_LIMIT_INFORMATION) is 144 bytes on 64-bit Windows and 112 on
    32-bit (winnt.h); a wrong field would shift it and SetInformationJobObject would refuse."""
    expected = 144 if ctypes.sizeof(ctypes.c_void_p) == 8 else 112
    assert ctypes.sizeof(winjob.ExtendedLimits) == expected
    api = FakeKernel32()
    winjob.Job(api)
    assert api.info_size == expected


@pytest.mark.parametrize("failing", ["CreateJobObjectW", "SetInformationJobObject"])
def test_a_job_that_cannot_be_made_raises_oserror(failing: str) -> None:
    api = FakeKernel32(fail=failing)
    with pytest.raises(OSError, match=failing):
        winjob.Job(api)
    if failing == "SetInformationJobObject":
        assert api.names()[-1] == "CloseHandle"  # the half-made job is not leaked


@NOT_WINDOWS
@pytest.mark.parametrize("failing", ["", "OpenProcess", "AssignProcessToJobObject"])
def test_a_suspended_process_runs_once_contained_even_without_a_job(failing: str) -> None:
    """The process starts suspended; it is resumed whether or not it could join a job (here
    psutil's real resume, SIGCONT; NtResumeProcess on Windows)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        psutil.Process(proc.pid).suspend()
        api = FakeKernel32(fail=failing)
        job = process.contain(proc.pid, api)
        assert (job is None) == bool(failing)
        assert ("OpenProcess", 0x0101, False, proc.pid) in api.calls
        deadline = time.monotonic() + 20
        while psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED:
            assert time.monotonic() < deadline, "the process was never resumed"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()


def test_windows_starts_a_new_group_suspended_and_no_session(windows: None) -> None:
    options = process.popen_options()
    assert options == {"creationflags": process.CREATE_NEW_PROCESS_GROUP | process.CREATE_SUSPENDED}
    if hasattr(subprocess, "CREATE_NEW_PROCESS_GROUP"):  # the values winbase.h gives
        assert subprocess.CREATE_NEW_PROCESS_GROUP == process.CREATE_NEW_PROCESS_GROUP


@NOT_WINDOWS
def test_ending_an_orphan_on_windows_asks_with_ctrl_break_then_kills_its_tree(
    windows: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No process groups on Windows: CTRL_BREAK_EVENT first, then the tree psutil found is
    killed; os.killpg is never called."""
    pid_file = tmp_path / "grandchild.pid"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
            "open(sys.argv[1], 'w').write(str(c.pid))\n"
            "time.sleep(120)\n",
            str(pid_file),
        ]
    )
    deadline = time.monotonic() + 20
    while not (pid_file.exists() and pid_file.read_text()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    breaks: list[int] = []
    real_kill = os.kill

    def fake_kill(pid: int, sig: int) -> None:
        if sig == process.CTRL_BREAK_EVENT:
            breaks.append(pid)  # a console event: nothing to deliver on this system
            return
        real_kill(pid, sig)

    def no_killpg(pgid: int, sig: int) -> None:
        raise AssertionError("os.killpg on Windows")

    monkeypatch.setattr(os, "kill", fake_kill)
    monkeypatch.setattr(os, "killpg", no_killpg)
    started = process.start_time(parent.pid)
    assert started is not None and process.orphan_group(parent.pid, started)
    process.end_group(parent.pid, grace_s=0.2)
    assert breaks == [parent.pid]
    assert parent.wait(timeout=30) == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while not _gone(grandchild):
        assert time.monotonic() < deadline, "the grandchild outlived its tree"
        time.sleep(0.05)


def test_on_windows_a_dead_leader_means_no_orphan(windows: None) -> None:
    """Without POSIX groups, only the recorded leader itself identifies the agent's tree (its
    job ended the rest when the worker died)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert not process.orphan_group(dead.pid, "1700000000.0")


@NOT_WINDOWS
def test_ending_a_tree_on_windows_terminates_its_job(
    windows: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    proc: TreeProcess[bytes] = TreeProcess([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(sys, "platform", "win32")
    api = FakeKernel32()
    proc.job = winjob.Job(api)
    proc.end_tree(grace_s=0)
    assert ("TerminateJobObject", 100, 1) in api.calls
    assert proc.wait(timeout=30) is not None  # psutil killed the leader the fake job did not


def test_alive_never_signals_the_process(windows: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """On Windows os.kill(pid, 0) terminates the process: liveness must come from psutil."""

    def forbidden(pid: int, sig: int) -> None:
        raise AssertionError("os.kill used to test liveness")

    monkeypatch.setattr(os, "kill", forbidden)
    assert process.alive(os.getpid())
    assert process.alive(os.getppid())
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert not process.alive(dead.pid)


def test_the_supervisor_child_is_asked_then_its_tree_ended(windows: None) -> None:
    """Child.stop on Windows: the child alone is asked first (CTRL_BREAK_EVENT, through
    ask_leader), the whole tree is ended only when it does not stop within the grace."""

    class Recorder:
        pid = 4242
        returncode: int | None = None

        def __init__(self) -> None:
            self.events: list[str] = []

        def poll(self) -> int | None:
            return self.returncode

        def ask_leader(self) -> None:
            self.events.append("ask_leader")

        def ask_tree(self) -> None:
            self.events.append("ask_tree")

        def wait(self, timeout: float | None = None) -> int:
            if self.returncode is None and timeout is not None:
                self.events.append(f"wait {timeout}")
                raise subprocess.TimeoutExpired("serve", timeout)
            return self.returncode or 0

        def end_tree(self, grace_s: float) -> None:
            self.events.append(f"end_tree {grace_s}")
            self.returncode = 1

    recorder = Recorder()
    Child(recorder).stop(grace_s=5)  # type: ignore[arg-type]
    assert recorder.events == ["ask_leader", "wait 5", "end_tree 0.0", "ask_tree"]


def test_windows_runs_commands_through_cmd_exe_verbatim(
    windows: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command travels in a variable that cmd.exe expands, so its quotes arrive intact."""
    monkeypatch.setenv("COMSPEC", r"C:\Windows\system32\cmd.exe")
    command = 'python -m pytest -k "a and b" && echo "done & dusted"'
    argv, variables = shell_command(command)
    assert argv == [r"C:\Windows\system32\cmd.exe", "/d", "/c", f"%{COMMAND_VARIABLE}%"]
    assert variables == {COMMAND_VARIABLE: command}
    assert subprocess.list2cmdline(argv).endswith("/d /c %WORKER_SHELL_COMMAND%")


def test_a_rename_retries_sharing_violations_on_windows(
    windows: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holding the file open makes os.replace fail for a moment on NTFS."""
    target = tmp_path / "state.json"
    target.write_text("old")
    real_replace = os.replace
    failures = iter([True, True])
    sleeps: list[float] = []

    def busy_replace(source: Any, dest: Any) -> None:
        if next(failures, False):
            raise PermissionError(13, "The process cannot access the file", str(dest))
        real_replace(source, dest)

    monkeypatch.setattr(os, "replace", busy_replace)
    monkeypatch.setattr(time, "sleep", sleeps.append)
    fsutil.atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert sleeps == [0.02, 0.04]
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary file left


def test_a_rename_gives_up_after_a_bounded_number_of_tries(
    windows: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def locked(source: Any, dest: Any) -> None:
        calls.append(str(dest))
        raise PermissionError(13, "The process cannot access the file", str(dest))

    monkeypatch.setattr(os, "replace", locked)
    monkeypatch.setattr(time, "sleep", lambda s: None)
    with pytest.raises(PermissionError):
        fsutil.replace(tmp_path / "a", tmp_path / "b")
    assert len(calls) == len(fsutil._REPLACE_DELAYS_S) + 1


def test_elsewhere_a_permission_error_on_rename_is_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    calls: list[str] = []

    def denied(source: Any, dest: Any) -> None:
        calls.append(str(dest))
        raise PermissionError(13, "Permission denied", str(dest))

    monkeypatch.setattr(os, "replace", denied)
    with pytest.raises(PermissionError):
        fsutil.replace(tmp_path / "a", tmp_path / "b")
    assert len(calls) == 1


@NOT_WINDOWS
def test_without_a_console_the_tree_is_ended_at_once(
    windows: None, sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """CTRL_BREAK_EVENT needs a console (none under pythonw or some Task Scheduler set-ups):
    when it cannot be sent nobody was asked, so the grace is not waited for."""
    real_kill = os.kill

    def no_console(pid: int, sig: int) -> None:
        if sig == process.CTRL_BREAK_EVENT:
            raise OSError(6, "The handle is invalid")
        real_kill(pid, sig)

    def no_waiting(seconds: float) -> None:
        raise AssertionError("waited for a tree that was never asked to stop")

    monkeypatch.setattr(os, "kill", no_console)
    monkeypatch.setattr(time, "sleep", no_waiting)
    process.end_group(sleeper.pid, grace_s=30)
    monkeypatch.undo()
    assert sleeper.wait(timeout=30) == -signal.SIGKILL
