"""Agents orphaned by a worker that died.

Every agent runs in its own process group (worker/process/proc.py), so a worker killed with SIGKILL
(the OOM killer, a power cut of the parent, `kill -9`) leaves its agent working on. Its task's
claim comes back when the lease expires, or at once for a resumed wait, and a second agent on
the same task and session would follow. So the agent's process group and start time are recorded
on the claim while it runs, and the next run in the workspace, holding the workspace lock, ends
the groups of claims whose worker is gone.

Safety: a group id is a pid, and pids are reused. The group is ended only when its leader is the
very process recorded (same start time), or, on POSIX, when the leader is gone and a process
group with that id still runs (worker/process/platform/process.py). On Windows the agent's Job
Object already ended the tree when the worker died; what is left (an agent that could not join a
job) is found by its leader alone.
"""

from __future__ import annotations

import json
import logging
import os

from worker.process.platform.process import alive, end_group, orphan_group, start_time
from worker.state.store import Store

__all__ = ["end_orphans", "lapse_dead_claims", "start_time"]

log = logging.getLogger(__name__)

_GRACE_S = 3.0


def end_orphans(store: Store, machine_id: str) -> list[str]:
    """End the agents of this machine's active claims whose worker is gone; the task ids."""
    ended = []
    for claim in store.active_claims():
        if claim["machine_id"] != machine_id or claim["pid"] in (0, os.getpid()):
            continue
        if alive(claim["pid"]):
            continue  # its worker still runs (it holds no lock here: a `worker waits` command)
        detail = json.loads(claim["detail"] or "{}")
        pgid, started = detail.get("agent_pgid"), detail.get("agent_started")
        if isinstance(pgid, int) and isinstance(started, str) and orphan_group(pgid, started):
            log.warning(
                "ending agent group %s left running by a dead run of %s", pgid, claim["task_id"]
            )
            end_group(pgid, _GRACE_S)
            ended.append(str(claim["task_id"]))
    return ended


def lapse_dead_claims(store: Store, machine_id: str) -> list[str]:
    """End the leases of this machine's claims whose run is gone (killed, or the machine
    restarted), so their tasks come back now rather than when the lease runs out; the task
    ids. A pid in use again by a process started after the claim is not its run."""
    lapsed = []
    for claim in store.active_claims():
        pid = claim["pid"]
        if claim["machine_id"] != machine_id or pid in (0, os.getpid()):
            continue
        started = start_time(pid)
        gone = not alive(pid) or (started is not None and float(started) > claim["claimed_at"])
        if gone and store.lapse_claim(str(claim["task_id"]), pid):
            log.warning(
                "the run holding %s (pid %s) is gone: its lease ends now", claim["task_id"], pid
            )
            lapsed.append(str(claim["task_id"]))
    return lapsed
