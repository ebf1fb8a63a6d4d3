"""Process control on Linux, macOS and Windows: groups, trees, jobs and pid identity.

Everything that starts, signals or recognises a process by its pid goes through here;
`worker/process/proc.py`, `worker/daemon/child.py` and `worker/process/orphans.py` call it. psutil
gives the process trees and start times on every system (no /proc parsing). The platform is read
from
`sys.platform` at each call, so that tests can run the macOS and Windows branches here.

- Start: `TreeProcess` is a Popen in its own process group. On POSIX it is a new session (its
  pid is the group id). On Windows it is a new process group, so that CTRL_BREAK_EVENT reaches
  it and not worker. It starts suspended, joins a kill-on-close Job Object
  (worker/process/platform/winjob.py), and only then runs: even its first child is in the job, and
  the job ends the whole tree when worker exits, however it exits.
- End: ask (SIGTERM to the group, or CTRL_BREAK_EVENT to the Windows group), wait a grace, then
  force (SIGKILL to the group, or TerminateJobObject). Descendants that left the group (setsid,
  a daemonising test runner) are found with psutil before the first signal and ended too.
  Without a console (Task Scheduler, pythonw), CTRL_BREAK_EVENT cannot be sent, so the end is
  forced at once.
- Identity: `start_time(pid)` is psutil's create time, and `same_process` compares it with a
  recorded one, so a recycled pid is never taken for the process recorded.
- Orphans: `orphan_group(pgid, started)` says whether a dead run's agent is still there and is
  the one recorded; `end_group` ends it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, AnyStr

from worker.process.lazyimport import lazy

if TYPE_CHECKING:
    import psutil

    from worker.process.platform import winjob
else:  # loaded when a process is first looked at: an idle or dry run never does
    psutil = lazy("psutil")
    winjob = lazy("worker.process.platform.winjob")

log = logging.getLogger(__name__)

# winbase.h process creation flags (subprocess names only the second, and only on Windows).
CREATE_SUSPENDED = 0x00000004
CREATE_NEW_PROCESS_GROUP = 0x00000200
# signal.CTRL_BREAK_EVENT exists on Windows only; its value there is 1 (wincon.h).
CTRL_BREAK_EVENT = getattr(signal, "CTRL_BREAK_EVENT", 1)
# psutil's create time is boot time plus the start tick on Linux, and NTP can move the boot
# time it reads by a second (psutil documents the clock dependence), so start times recorded by
# an earlier run are compared within this margin.
_SAME_START_S = 1.0
_FIRST_POLL_S = 0.002
_POLL_S = 0.05


def windows() -> bool:
    return sys.platform == "win32"


def popen_options() -> dict[str, Any]:
    """The Popen arguments that put a new process in its own group (and, on Windows, hold it
    suspended until it is in its job)."""
    if windows():
        return {"creationflags": CREATE_NEW_PROCESS_GROUP | CREATE_SUSPENDED}
    return {"start_new_session": True}


class TreeProcess(subprocess.Popen[AnyStr]):
    """A Popen whose whole tree can be asked to stop and ended: see the module docstring."""

    def __init__(self, args: Sequence[str], **kwargs: Any) -> None:
        options = popen_options()
        if "creationflags" in options:
            options["creationflags"] |= kwargs.pop("creationflags", 0)
        super().__init__(args, **kwargs, **options)
        self.job = contain(self.pid) if windows() else None

    def ask_leader(self) -> None:
        """Ask the process to stop: SIGTERM to it alone, or on Windows CTRL_BREAK_EVENT to its
        console group (it and the children that started no group of their own; worker's
        agents always start their own)."""
        if windows():
            _ctrl_break(self.pid)
        else:
            with contextlib.suppress(ProcessLookupError):
                self.send_signal(signal.SIGTERM)

    def ask_tree(self) -> None:
        """Ask the whole tree to stop, without waiting."""
        _ask(self.pid, self._family())

    def end_tree(self, grace_s: float) -> None:
        """Ask the tree to stop, give it `grace_s` (0: none), then end whatever is left."""
        family = self._family()
        if grace_s > 0 and _ask(self.pid, family):
            _wait(lambda: self.poll() is None or _running(self.pid, family), grace_s)
        _force(self.pid, family, self.job)

    def _family(self) -> list[psutil.Process]:
        # Once the leader is reaped its pid may be another process's: look no further.
        return [] if self.poll() is not None else tree(self.pid)


def contain(pid: int, api: Any | None = None) -> winjob.Job | None:
    """Put the suspended process `pid` in a new kill-on-close job, then let it run. Without a
    job (nested jobs refused, no rights) it runs anyway and its tree is ended through psutil."""
    job: winjob.Job | None = None
    try:
        job = winjob.Job(api)
        job.assign(pid)
    except OSError as exc:
        log.warning("process %s runs outside a job object (%s): its tree is ended by pid", pid, exc)
        if job is not None:
            job.close()
        job = None
    finally:
        psutil.Process(pid).resume()
    return job


def tree(pid: int) -> list[psutil.Process]:
    """The process and all its descendants now; [] when it is gone."""
    try:
        leader = psutil.Process(pid)
        return [leader, *leader.children(recursive=True)]
    except psutil.Error:
        return []


def start_time(pid: int) -> str | None:
    """The process's start time (seconds since the epoch, as text); None when it is gone."""
    try:
        return repr(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def same_process(pid: int, started: str) -> bool:
    """Process `pid` exists and started when the recorded one did."""
    now = start_time(pid)
    return now is not None and _same_start(now, started)


def _same_start(now: str, started: str) -> bool:
    try:
        return abs(float(now) - float(started)) <= _SAME_START_S
    except ValueError:
        return False  # not a time at all; an older worker's clock ticks differ by far more


def alive(pid: int) -> bool:
    """The process exists and is not a zombie. Never signals it: on Windows `os.kill(pid, 0)`
    would terminate it."""
    if pid == os.getpid():
        return True
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True  # exists, but we may not look at it


def group_running(pgid: int) -> bool:
    """A member of POSIX process group `pgid` is still running (zombies, which the init of
    some containers never reaps, do not count)."""
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                return True
        except (OSError, psutil.Error):
            continue
    return False


def orphan_group(pgid: int, started: str) -> bool:
    """The agent group recorded as (`pgid`, `started`) still runs and is that very one: its
    leader has the recorded start time or, on POSIX, the leader is gone and a group with that
    id still runs (POSIX does not reuse a pid while a process group uses it)."""
    leader = start_time(pgid)
    if leader is not None:
        return _same_start(leader, started)
    return not windows() and group_running(pgid)


def end_group(pgid: int, grace_s: float) -> None:
    """End a group this process did not start (an orphan): ask, wait `grace_s`, force."""
    family = tree(pgid)
    if _ask(pgid, family):
        _wait(lambda: _running(pgid, family), grace_s)
    _force(pgid, family, None)


def _ask(pgid: int, family: list[psutil.Process]) -> bool:
    """Ask the group and the tree to stop; False when the request could not be sent."""
    if windows():
        return _ctrl_break(pgid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    for process in _outside_group(pgid, family):
        with contextlib.suppress(psutil.Error):
            process.terminate()
    return True


def _force(pgid: int, family: list[psutil.Process], job: winjob.Job | None) -> None:
    if job is not None:
        with contextlib.suppress(OSError):
            job.terminate()
    elif not windows():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    for process in family:
        with contextlib.suppress(psutil.Error):
            process.kill()  # psutil checks the start time first: never a recycled pid


def _wait(running: Callable[[], bool], grace_s: float) -> None:
    """Until `running()` is false or the grace is over; short sleeps first, since most trees
    end within milliseconds of being asked."""
    deadline = time.monotonic() + grace_s
    pause = _FIRST_POLL_S
    while running() and time.monotonic() < deadline:
        time.sleep(pause)
        pause = min(pause * 2, _POLL_S)


def _running(pgid: int, family: list[psutil.Process]) -> bool:
    for process in family:
        with contextlib.suppress(psutil.Error):
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                return True
    return not windows() and group_running(pgid)


def _outside_group(pgid: int, family: list[psutil.Process]) -> list[psutil.Process]:
    outside = []
    for process in family:
        try:
            if os.getpgid(process.pid) != pgid:
                outside.append(process)
        except OSError:
            continue
    return outside


def _ctrl_break(pid: int) -> bool:
    """CTRL_BREAK_EVENT to the console process group `pid`; False without a console (the
    caller then ends the tree by force at once, since nobody was asked)."""
    try:
        os.kill(pid, CTRL_BREAK_EVENT)
    except OSError as exc:
        log.info("cannot send CTRL_BREAK_EVENT to %s (%s): ending it by force", pid, exc)
        return False
    return True
