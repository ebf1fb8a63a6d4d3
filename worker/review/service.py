"""What `worker directives` and `worker knowledge` show and do, as plain data (no CLI here)."""

from __future__ import annotations

import re
from typing import Any

from worker.config import Settings
from worker.errors import UsageError
from worker.review import db
from worker.review import directives as queue
from worker.review.knowledge import KnowledgeStore
from worker.review.triggers import REVIEWERS
from worker.state.store import Store

_ID = re.compile(r"^[Dd]?(\d+)$")


def _open(settings: Settings) -> Store:
    store = Store(settings.db_path)
    db.ensure(store)
    return store


def list_directives(settings: Settings, include_done: bool = False) -> dict[str, Any]:
    """Pending directives in prompt order; with `include_done`, every directive and its fate."""
    with _open(settings) as store:
        items = queue.all_directives(store) if include_done else queue.pending(store)
        return {
            "task_seq": db.task_seq(store),
            "directives": [d.as_dict() for d in items],
        }


def drop_directive(settings: Settings, ref: str) -> dict[str, Any]:
    """Drop a pending directive by id (`D12` or `12`); UsageError if none is pending."""
    match = _ID.match(ref.strip())
    if not match:
        raise UsageError(f"{ref!r} is not a directive id (like D12); see `worker directives list`")
    directive_id = int(match.group(1))
    with _open(settings) as store:
        if not queue.drop(store, directive_id):
            found = queue.get(store, directive_id)
            state = f"it is {found.state}" if found else "there is no such directive"
            raise UsageError(f"cannot drop D{directive_id}: {state} (see `worker directives list`)")
        dropped = queue.get(store, directive_id)
        assert dropped is not None
        return {"dropped": dropped.as_dict()}


def knowledge_docs(settings: Settings) -> dict[str, Any]:
    ks = KnowledgeStore.for_settings(settings)
    docs = [
        {
            "path": doc.path,
            "title": doc.title,
            "folder": doc.folder,
            "status": doc.status,
            "writer": "user" if doc.user_written else doc.writer,
            "after_task": doc.after_task,
            "rules": len(doc.rules),
            # items the knowledge reviewer flagged for a person to confirm
            "needs_review": sum("needs user review" in rule for rule in doc.rules),
        }
        for doc in ks.docs()
    ]
    return {"root": str(ks.root), "docs": docs}


def review_status(settings: Settings, limit: int = 20) -> dict[str, Any]:
    """Reviewer intervals and counters, recent runs, and what the reviewers cost in all."""
    cfg = settings.review
    with _open(settings) as store:
        reviewers = []
        for name in REVIEWERS:
            state = db.reviewer_state(store, name)
            rcfg = cfg.reviewer(name)
            reviewers.append(
                {
                    "reviewer": name,
                    "enabled": cfg.runs(name),
                    "interval": state.effective_interval(rcfg.interval),
                    "configured_interval": rcfg.interval,
                    "since_last_run": state.since,
                    "runs": state.runs,
                }
            )
        runs = db.recent_runs(store, limit=limit)
        return {
            "task_seq": db.task_seq(store),
            "urgency": db.counter(store, "urgency"),
            "cost_usd": round(db.review_cost(store), 6),
            "reviewers": reviewers,
            "runs": runs,
        }
