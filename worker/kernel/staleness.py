"""Staleness: what dead runs left behind, each found by its own rule.

- a claim whose lease expired and that no source took back (LEASE_EXPIRED);
- a worktree under `<state>/worktrees` whose task holds no live claim (CLAIM_GONE): it is
  committed to its branch and removed, or kept when that fails; branches are never deleted;
- wait states past their TTL are the wait-state owner's (phase 0), control orders past theirs
  are dropped by `decide` (CONTROL_EXPIRED).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from worker.config import Settings
from worker.kernel.model import StaleItem
from worker.store import Store
from worker.workspace_git import branch_name, changed_files

log = logging.getLogger(__name__)


def find(settings: Settings, store: Store, now: float | None = None) -> list[StaleItem]:
    now = time.time() if now is None else now
    items = [
        StaleItem("claim", claim["task_id"], "LEASE_EXPIRED") for claim in store.expired_claims(now)
    ]
    live = {
        branch_name(row["task_id"]).split("/", 1)[1]
        for row in store.db.execute(
            "SELECT task_id FROM claims WHERE state = 'active' AND lease_until > ?", (now,)
        )
    }
    for path in worktrees(settings):
        if path.name in live:
            continue
        items.append(
            StaleItem(
                "worktree", path.name, "CLAIM_GONE", holds_work=bool(changed_files(path)), ref=path
            )
        )
    return items


def worktrees(settings: Settings) -> list[Path]:
    folder = settings.state / "worktrees"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def clean_claim(store: Store, task_id: str) -> str:
    """Release a claim whose lease expired (still expired now: a fresh claim is left alone)."""
    claim = store.claim_of(task_id)
    if claim is None or claim["state"] != "active" or claim["lease_until"] > time.time():
        return "claim is live again; left alone"
    store.release_claim(task_id, "expired")
    return "claim released (lease expired)"


def clean_worktree(settings: Settings, path: Path) -> str:
    """Commit what the worktree holds to its branch, then remove it; keep it on any doubt."""
    from worker.workspace_git import finish_worktree

    try:
        committed = finish_worktree(
            settings.workspace, path, f"worker: work left in {path.name} by a run that ended"
        )
    except Exception as exc:  # not a worktree any more, git missing...: keep it
        log.warning("stale worktree %s kept: %s", path, exc)
        return f"kept: {exc}"
    if path.exists():
        return "kept (could not commit or remove it)"
    return "committed to its branch and removed" if committed else "removed (nothing to keep)"
