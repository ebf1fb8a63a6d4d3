"""What dead runs and failures leave behind: the agents of dead runs ended, lapsed claims given
back, runs left open closed, and the record of a run an unexpected error ended."""

from __future__ import annotations

import json

from worker.config import Settings
from worker.kernel.scheduling import Decision
from worker.modes import ModeSet
from worker.sources.base import TaskSource
from worker.state.store import Store

# A run's outcome when an error of worker's own, or of its set-up, ended it before its task had
# a result (`worker log` shows what failed); never a task's outcome.
ABORTED = "aborted"


def record_abort(
    store: Store, run_id: int, taken: list[Decision], exc: BaseException, duration_s: float
) -> None:
    """The record of a run an unexpected error ended. A task result already recorded stands
    (the agent's work is not undone by a failure after it), with what failed added; else the
    outcome is `aborted` and a claimed task keeps its claim until its lease ends, so the next
    run takes it again."""
    what = f"{type(exc).__name__}: {exc}"
    row = store.db.execute("SELECT outcome, reason, reason_codes FROM runs WHERE id = ?", (run_id,))
    outcome, reason, codes = row.fetchone()
    if outcome:
        store.finish_run(
            run_id,
            reason=f"{reason or ''} (then worker failed: {what})"[:1000],
            reason_codes=[*json.loads(codes or "[]"), "FAILED_AFTER_RESULT"],
            duration_s=duration_s,
        )
        return
    task = taken[0].task if taken else None
    store.finish_run(
        run_id,
        task_id=task.id if task else None,
        source=taken[0].source if taken else None,
        outcome=ABORTED,
        reason=what[:1000],
        reason_codes=["RUN_ABORTED"],
        duration_s=duration_s,
    )


def recover(
    settings: Settings, store: Store, sources: list[TaskSource]
) -> tuple[list[str], list[str]]:
    """The agents dead runs left working, ended; then the claims whose lease ran out or whose
    run is gone, given back (in that order: before any claim comes back, its orphan agent has
    ended)."""
    from worker.process.orphans import end_orphans, lapse_dead_claims  # psutil: not for a dry run

    orphans = end_orphans(store, settings.machine_id)
    lapse_dead_claims(store, settings.machine_id)  # their tasks come back just below
    recovered = []
    for source in sources:
        recover = getattr(source, "recover_expired", None)
        if recover is not None:
            recovered += recover()
    return orphans, recovered


def close_open_runs(settings: Settings, store: Store, modes: ModeSet, run_id: int) -> None:
    """Runs left open by a process that died: closed, their paid iterations counted."""
    from worker.state.dead_runs import close_dead_runs  # psutil, as recover

    def agent_of(mode_id: str) -> str | None:
        mode = modes.modes.get(mode_id)
        return mode.agent if mode is not None else None

    close_dead_runs(store, settings.machine_id, settings.logs, agent_of, run_id)
