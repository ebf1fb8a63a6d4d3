"""A task's totals over all its runs (a task that follows its pull request lives through
several): what the final report says when the task ends without an agent run of its own."""

from __future__ import annotations

from dataclasses import dataclass

from worker.state.store import Store


@dataclass(frozen=True)
class Totals:
    runs: int = 0
    iterations: int = 0
    cost_usd: float = 0.0
    duration_s: float = 0.0
    branch: str | None = None  # the branch its last run worked on

    def words(self) -> str:
        """`2 iterations over 2 runs, $0.0200, 3.1 s`."""
        return (
            f"{self.iterations} iteration(s) over {self.runs} run(s), ${self.cost_usd:.4f}, "
            f"{self.duration_s:.1f} s"
        )


def task_totals(store: Store, task_id: str) -> Totals:
    # Each iteration's own cost: a resumed run's record carries the task's running total.
    row = store.db.execute(
        "SELECT COUNT(DISTINCT r.id), COUNT(i.id), COALESCE(SUM(i.cost_usd), 0),"
        " (SELECT COALESCE(SUM(duration_s), 0) FROM runs WHERE task_id = ? AND iterations > 0)"
        " FROM runs r JOIN iterations i ON i.run_id = r.id WHERE r.task_id = ?",
        (task_id, task_id),
    ).fetchone()
    branch = store.db.execute(
        "SELECT branch FROM runs WHERE task_id = ? AND branch IS NOT NULL ORDER BY id DESC LIMIT 1",
        (task_id,),
    ).fetchone()
    return Totals(int(row[0]), int(row[1]), float(row[2]), float(row[3]), branch and branch[0])
