"""`worker supervise status`: the supervisor's state, restart history and revisions."""

from __future__ import annotations

from typing import Any

from worker.config import Settings
from worker.daemon import health
from worker.daemon.state import SupervisorState
from worker.daemon.supervisor import PRESENCE_KEY
from worker.process.platform.process import alive
from worker.state.store import Store


def supervise_status(settings: Settings, *, events: int = 20) -> dict[str, Any]:
    """Everything in one dict (the `--json` form); no database yet means nothing happened."""
    if not settings.db_path.exists():
        return {
            "supervisor": {"running": False, "pid": None},
            "state": {"current_good_rev": None, "candidate_rev": None, "last_failure_reason": None},
            "serve": {},
            "events": [],
            "revisions": [],
        }
    with Store(settings.db_path) as store:
        state = SupervisorState(store)
        snap = state.snapshot()
        presence = state.get_json(PRESENCE_KEY) or {}
        pid = presence.get("pid")
        running = "stopped_at" not in presence and isinstance(pid, int) and alive(pid)
        return {
            "supervisor": {"running": running, **presence},
            "state": {
                "current_good_rev": snap.current_good_rev,
                "candidate_rev": snap.candidate_rev,
                "last_failure_reason": snap.last_failure_reason,
            },
            "serve": health.read_raw(store),
            "events": state.events(limit=events),
            "revisions": state.revisions(),
        }
