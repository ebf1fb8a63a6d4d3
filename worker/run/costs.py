"""Spend: what the agents cost, from the recorded iterations, and the daily cap.

Each agent call's cost is in `iterations` (a resumed task's run also carries the cost of the
runs before it, so `runs.cost_usd` would count twice); reviewers' calls are in
`review_runs` and are always shown apart. Days are UTC days.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worker.config import Settings
from worker.errors import UsageError
from worker.state.store import Store

if TYPE_CHECKING:
    from worker.waits.saving import WaitPoint

BY = ("day", "mode", "source", "machine")
_TASK_KEY = {
    "day": "date(r.started_at, 'unixepoch')",
    "mode": "i.mode",
    "source": "COALESCE(r.source, '-')",
    "machine": "r.machine_id",
}
_REVIEW_KEY = {
    "day": "date(at, 'unixepoch')",
    "mode": "'reviewer ' || reviewer",
    "source": "'reviewer ' || reviewer",
    "machine": "?",
}
DAILY_BUDGET_REACHED = "DAILY_BUDGET_REACHED"


@dataclass
class CostReport:
    by: str
    since: str | None
    tasks: list[dict[str, Any]] = field(default_factory=list)
    reviewers: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "since": self.since,
            "tasks": self.tasks,
            "reviewers": self.reviewers,
            "total_tasks_usd": round(sum(r["usd"] for r in self.tasks), 6),
            "total_reviewers_usd": round(sum(r["usd"] for r in self.reviewers), 6),
        }


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """`2026-11-01`, an ISO time, `today`, or `7d` (the last 7 days); None for all time."""
    if not text:
        return None
    now = now or datetime.now(UTC)
    word = text.strip().lower()
    if word == "today":
        return now.replace(hour=0, minute=0, second=0, microsecond=0)
    if word.endswith("d") and word[:-1].isdigit():
        return now - timedelta(days=int(word[:-1]))
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"--since {text!r}: give a date (2026-11-01), a time, `today` or `7d`"
        ) from None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def report(settings: Settings, by: str = "day", since: datetime | None = None) -> CostReport:
    if by not in BY:
        raise UsageError(f"--by {by!r}: use one of {', '.join(BY)}")
    result = CostReport(by, since.isoformat() if since else None)
    if not settings.db_path.exists():
        return result
    start = since.timestamp() if since else 0.0
    with Store(settings.db_path) as store:
        result.tasks = _rows(
            store.db,
            f"SELECT {_TASK_KEY[by]} AS key, COUNT(*) AS calls, COUNT(DISTINCT r.id) AS runs,"
            " SUM(i.cost_usd) AS usd FROM iterations i JOIN runs r ON r.id = i.run_id"
            " WHERE r.started_at >= ? GROUP BY key ORDER BY key",
            (start,),
        )
        params: tuple[Any, ...] = (start,) if by != "machine" else (settings.machine_id, start)
        result.reviewers = _rows(
            store.db,
            f"SELECT {_REVIEW_KEY[by]} AS key, COUNT(*) AS calls, SUM(cost_usd) AS usd"
            " FROM review_runs WHERE at >= ? GROUP BY key ORDER BY key",
            params,
        )
    return result


def spent_today(store: Store, machine_id: str, now: datetime | None = None) -> float:
    """This machine's spend since 00:00 UTC: its agents' and its reviewers' calls."""
    day = (now or datetime.now(UTC)).replace(hour=0, minute=0, second=0, microsecond=0)
    start = day.timestamp()
    row = store.db.execute(
        "SELECT COALESCE(SUM(i.cost_usd), 0) FROM iterations i JOIN runs r ON r.id = i.run_id"
        " WHERE r.machine_id = ? AND r.started_at >= ?",
        (machine_id, start),
    ).fetchone()
    reviewers = _rows(
        store.db, "SELECT SUM(cost_usd) AS usd FROM review_runs WHERE at >= ?", (start,)
    )
    return float(row[0]) + (reviewers[0]["usd"] if reviewers else 0.0)


def daily_cap_reached(settings: Settings, store: Store) -> float | None:
    """Today's spend when `daily_cost_cap_usd` is set and reached; otherwise None. With a
    fleet database the cap is the fleet's: the other machines' finished runs count too."""
    cap = settings.daily_cost_cap_usd
    if cap is None:
        return None
    spent = spent_today(store, settings.machine_id)
    if store.history is not None:
        spent += store.history.others_spent_today(settings.machine_id)
    return spent if spent >= cap else None


def save_budget_wait(settings: Settings, point: WaitPoint, spent: float) -> Path:
    """The task waits until the next UTC day (a timed wait), where it stands."""
    # Here, not at the top: `status` and runs within the cap only read the spend.
    from worker.waits.record import save_wait
    from worker.waits.saving import base_state

    tomorrow = (datetime.now(UTC) + timedelta(days=1)).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    state = base_state(settings, point, "time", tomorrow)
    state.reason = (
        f"{DAILY_BUDGET_REACHED}: ${spent:.2f} spent today, the cap is "
        f"${settings.daily_cost_cap_usd:.2f}"
    )
    state.wait_for = f"the next day ({tomorrow:%Y-%m-%d} 00:00 UTC): the daily spend cap"
    return save_wait(settings, state)


def _rows(db: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
    try:
        rows = db.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []  # no reviewer has run here yet
        raise
    return [{**dict(row), "usd": round(float(row["usd"] or 0.0), 6)} for row in rows]
