"""Agents orphaned by a worker that died.

Every agent runs in its own process group (worker/proc.py), so a worker killed with SIGKILL
(the OOM killer, a power cut of the parent, `kill -9`) leaves its agent working on. Its task's
claim comes back when the lease expires, or at once for a resumed wait, and a second agent on
the same task and session would follow. So the agent's process group is recorded on the claim
while it runs, and the next run in the workspace, holding the workspace lock, ends the groups
of claims whose worker is gone.

Safety: a group id is a pid, and pids are reused. The group is ended only when its leader is
the very process recorded (same start time, read from /proc), or, when the leader is gone, when
a process group with that id still exists: Linux does not reuse a pid while a group uses it.
Elsewhere than Linux, nothing is recorded and nothing is ended.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

from worker.store import Store

log = logging.getLogger(__name__)

_GRACE_S = 3.0


def start_time(pid: int) -> str | None:
    """The process's start time (clock ticks after boot, /proc/PID/stat field 22)."""
    if sys.platform != "linux":
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def end_orphans(store: Store, machine_id: str) -> list[str]:
    """End the agents of this machine's active claims whose worker is gone; the task ids."""
    ended = []
    for claim in store.active_claims():
        if claim["machine_id"] != machine_id or claim["pid"] in (0, os.getpid()):
            continue
        if _alive(claim["pid"]):
            continue  # its worker still runs (it holds no lock here: a `worker waits` command)
        detail = json.loads(claim["detail"] or "{}")
        pgid, started = detail.get("agent_pgid"), detail.get("agent_started")
        if isinstance(pgid, int) and started and _is_ours(pgid, started):
            log.warning(
                "ending agent group %s left running by a dead run of %s", pgid, claim["task_id"]
            )
            _end_group(pgid)
            ended.append(str(claim["task_id"]))
    return ended


def _is_ours(pgid: int, started: str) -> bool:
    leader = start_time(pgid)
    if leader is not None:
        return leader == started
    return _group_exists(pgid)


def _end_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + _GRACE_S
    while time.monotonic() < deadline and _group_running(pgid):
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _group_running(pgid: int) -> bool:
    """A member of the group is still running (zombies, never reaped by the init of some
    containers, do not count)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _state(pid) != "Z"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "?"
