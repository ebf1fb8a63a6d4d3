"""The reviewers' step after a task, timed and costed on its own (never the task's): what the
run's report and the live display say of it.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from worker.state.progress_step import Display
from worker.state.store import Store


@dataclass
class ReviewStep:
    """The reviewers' step after a task: its own time and cost, never the task's."""

    duration_s: float = 0.0
    cost_usd: float = 0.0
    ran: int = 0


@contextmanager
def review_step(store: Store, display: Display | None) -> Iterator[ReviewStep]:
    """Time the reviewers and read what they cost from their own records."""
    step = ReviewStep()
    before = _review_totals(store)
    if display is not None:
        display.phase("reviewers")
    started = time.monotonic()
    try:
        yield step
    finally:
        step.duration_s = time.monotonic() - started
        after = _review_totals(store)
        step.ran, step.cost_usd = after[0] - before[0], after[1] - before[1]
        if display is not None:
            text = (
                f"reviewers: {step.ran} ran in {step.duration_s:.1f}s, ${step.cost_usd:.4f}"
                if step.ran
                else None
            )
            display.phase_end(text)


def _review_totals(store: Store) -> tuple[int, float]:
    try:
        row = store.db.execute("SELECT COUNT(*), COALESCE(SUM(cost_usd), 0) FROM review_runs")
        count, cost = row.fetchone()
    except sqlite3.OperationalError:
        return 0, 0.0  # no reviewer has ever run here
    return int(count), float(cost)
