"""Staleness: what dead runs left behind, each found by its own rule.

- a claim whose lease expired and that no source took back (LEASE_EXPIRED); the inbox's
  claims are the inbox's own (`InboxSource.recover_expired`, at the start of the next run):
  released here, after the decision, a message would come back a run later, taken without the
  LEASE_EXPIRED that explains it, and in a fleet whose inboxes are not shared it would be
  released on a machine that does not hold its file (stranded in another's `claimed/`);
- a worktree under `<state>/worktrees` whose task holds no live claim (CLAIM_GONE): it is
  committed to its branch and removed, or kept when that fails; branches are never deleted;
- wait states past their TTL are the wait-state owner's (phase 0), control orders past theirs
  are dropped by `decide` (CONTROL_EXPIRED).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from worker.config import Settings
from worker.kernel.model import StaleItem
from worker.sources import inbox
from worker.state.store import Store

log = logging.getLogger(__name__)


def find(settings: Settings, store: Store, now: float | None = None) -> list[StaleItem]:
    now = time.time() if now is None else now
    items = [
        StaleItem("claim", claim["task_id"], "LEASE_EXPIRED")
        for claim in store.expired_claims(now)
        if claim["source"] != inbox.InboxSource.name
    ]
    left = worktrees(settings)
    if not left:
        return items
    # git's helpers (and the process layer under them) only when a worktree was left behind.
    from worker.process.workspace_git import branch_name, changed_files

    live = {
        branch_name(row["task_id"]).split("/", 1)[1]
        for row in store.db.execute(
            "SELECT task_id FROM claims WHERE state = 'active' AND lease_until > ?", (now,)
        )
    }
    for path in left:
        if path.name in live:
            continue
        items.append(
            StaleItem(
                "worktree",
                path.name,
                "CLAIM_GONE",
                holds_work=bool(changed_files(path, settings.workspace)),
                ref=path,
            )
        )
    return items


def worktrees(settings: Settings) -> list[Path]:
    folder = settings.state / "worktrees"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def clean_claim(store: Store, task_id: str) -> str:
    """Release a claim whose lease expired (still expired now: a fresh claim is left alone).
    Only claims of sources without files to move (GitHub, fallback, waits) come here; the
    inbox gives back its own (see the module's doc)."""
    if not store.recover_claim(task_id, _nothing):
        return "claim is live again; left alone"
    return "claim released (lease expired)"


def _nothing(claim: dict[str, Any]) -> None:
    """No file to move: releasing the claim is the whole recovery."""


def clean_worktree(settings: Settings, path: Path) -> str:
    """Commit what the worktree holds to its branch, then remove it; keep it on any doubt."""
    from worker.process.workspace_git import finish_worktree  # see find()

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
