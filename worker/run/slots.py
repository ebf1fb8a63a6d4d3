"""Slots: several tasks at once in one workspace (`max_parallel`).

With `max_parallel = N > 1`, a run holds the workspace lock (`<state>/run.lock`) only for its
scheduling step, and a slot for its task:

- it waits for the workspace lock (other runs hold it for the seconds their scheduling takes),
  then takes a free slot: `<state>/slots/slot-<k>.lock`, k in 0..N-1, held with the same OS lock
  until the run ends. No slot free: LockHeld, exit 75, as a busy workspace always did;
- it decides with the tasks of the other slots out of the choice (the kernel's
  `Snapshot.others_running`), holds new tasks back under the shared limits (below), claims,
  writes its slot's record (`slot-<k>.json`: pid, run, task, cap), and lets the workspace lock
  go; the task runs holding its slot alone;
- a task that edits the workspace in place runs alone: still holding the workspace lock, its
  run waits for every other slot to end and takes them all, so that nothing starts beside it.

The OS lets a lock go when its process ends, however it ends (kill -9): the slot frees itself,
and the dead run's claim, agent and record are recovered by the next run exactly as with one
slot (worker/process/orphans.py, worker/state/dead_runs.py). Claims stay what makes a task run
once: slots only bound how many run.

Shared limits: a task is not started when today's spend, plus what the running tasks may still
spend up to their caps, plus the new task's cap, would pass `daily_cost_cap_usd`; and once one
slot's agent hits its usage limit (429/529), no slot starts or continues a task before the
reset (each running task waits, as the one that hit it does).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from worker.config import Settings
from worker.delivery import task_in_worktree
from worker.errors import LockHeld
from worker.kernel.model import Decision, Reason, Snapshot
from worker.models import Task
from worker.modes import Mode
from worker.process.locking import held, workspace_lock
from worker.process.platform.process import start_time
from worker.run.costs import spent_today
from worker.run.iteration import task_cost_cap
from worker.state.fsutil import atomic_write_text
from worker.state.run_report import RunOptions
from worker.state.slot_records import SlotRecord, folder, running
from worker.state.store import Store
from worker.waits.record import save_wait
from worker.waits.saving import WaitPoint, base_state, usage_reset_at

log = logging.getLogger(__name__)

# How long a run waits for another's scheduling step: seconds as a rule, a task's length when
# an in-place task waits there for the other slots to end (then the run exits 75).
SCHEDULING_WAIT_S = 120.0
_POLL_S = 0.1
USAGE_LIMIT_KEY = "slots.usage_limit_until"


def in_place(settings: Settings, options: RunOptions, task: Task) -> bool:
    """The task edits the workspace itself (no worktree), as `worker.run.tasks.execute` does."""
    return not task_in_worktree(settings, task.source, task.ref, options.use_worktree)


class Slot:
    """One slot of the workspace for one run: enter takes the workspace lock (waiting for it)
    and a free slot; `release_scheduling` lets the workspace lock go once the task is claimed;
    exit frees the slot."""

    def __init__(
        self, settings: Settings, stop: threading.Event, wait_s: float = SCHEDULING_WAIT_S
    ) -> None:
        self.settings = settings
        self.folder = folder(settings)
        self.index = -1
        self._stop = stop
        self._wait_s = wait_s
        self._scheduling = contextlib.ExitStack()
        self._slots = contextlib.ExitStack()
        self._cap = 0.0  # the claimed task's cost cap

    def __enter__(self) -> Slot:
        _wait_for(self._scheduling, lambda: workspace_lock(self.settings), self._wait_s, self._stop)
        try:
            self.index = self._take_free()
        except BaseException:
            self._scheduling.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._record_path(self.index).unlink(missing_ok=True)
        finally:
            self._slots.close()
            self._scheduling.close()

    def _take_free(self) -> int:
        self.folder.mkdir(parents=True, exist_ok=True)
        for k in range(self.settings.max_parallel):
            try:
                self._slots.enter_context(held(self._lock_path(k), "busy"))
            except LockHeld:
                continue
            self._record_path(k).unlink(missing_ok=True)  # a killed holder's record
            return k
        n = self.settings.max_parallel
        raise LockHeld(
            f"all {n} slots of {self.settings.workspace} run a task (max_parallel = {n}); "
            "try again later"
        )

    def _lock_path(self, k: int) -> Path:
        return self.folder / f"slot-{k}.lock"

    def _record_path(self, k: int) -> Path:
        return self.folder / f"slot-{k}.json"

    # -- under the workspace lock -------------------------------------------------------------
    def others(self) -> list[SlotRecord]:
        """The tasks the other slots run now (their lock held, their record written)."""
        return [r for r in running(self.settings) if r.slot != self.index]

    def observe(self, store: Store, snap: Snapshot) -> Snapshot:
        """The snapshot with the other slots' tasks, the slot count and a usage limit that
        holds every new task back."""
        held_by = Reason.USAGE_LIMIT_HELD if usage_limit_until(self.settings, store) else None
        return dataclasses.replace(
            snap,
            others_running=frozenset(r.task_id for r in self.others()),
            slots=self.settings.max_parallel,
            held=held_by,
        )

    def over_daily_cap(self, store: Store, cap_usd: float) -> bool:
        """A task of cap `cap_usd` would pass the daily cap with the running tasks at theirs."""
        daily = self.settings.daily_cost_cap_usd
        if daily is None:
            return False
        spent = spent_today(store, self.settings.machine_id)
        if store.history is not None:
            spent += store.history.others_spent_today(self.settings.machine_id)
        return (
            committed(spent, [(r.cap_usd, _spent(store, r.run_id)) for r in self.others()], cap_usd)
            > daily + 1e-9
        )

    def admit(
        self, store: Store, options: RunOptions, decision: Decision, mode: Mode
    ) -> tuple[Decision, str | None]:
        """The chosen task under the shared limits: the decision (noting a wait to run alone)
        and None, or the Reason that holds every new task back for now."""
        task = decision.task
        assert task is not None
        self._cap = task_cost_cap(self.settings, mode)
        if self.over_daily_cap(store, self._cap):
            return decision, Reason.DAILY_CAP_HELD
        if in_place(self.settings, options, task):
            others = self.others()
            if others:
                running = ", ".join(record.task_id for record in others)
                log.warning("%s edits the workspace in place: it waits for %s", task.id, running)
            self.run_alone()  # held, every one: nothing starts beside it
            if others:
                codes = (*decision.reason_codes, Reason.IN_PLACE_WAITED)
                decision = dataclasses.replace(decision, reason_codes=codes)
        return decision, None

    def run_alone(self) -> None:
        """Wait for every other slot to end and hold them all (an in-place task); still under
        the workspace lock, so that nothing new starts meanwhile."""
        for path in [self._lock_path(k) for k in range(self.settings.max_parallel)]:
            if path != self._lock_path(self.index):
                _wait_for(self._slots, functools.partial(held, path, "busy"), None, self._stop)

    def started(self, run_id: int, task: Task) -> None:
        """The task is claimed: its record, for the other slots' scheduling."""
        pid = os.getpid()
        record = SlotRecord(self.index, pid, start_time(pid) or "", run_id, task.id, self._cap)
        atomic_write_text(self._record_path(self.index), json.dumps(asdict(record)))

    def release_scheduling(self) -> None:
        self._scheduling.close()


def committed(spent: float, running: list[tuple[float, float]], new_cap: float) -> float:
    """Today's spend, plus what each running task (cap, spent so far) may still spend, plus
    the new task's cap: what today could cost at most once the new task starts."""
    return spent + sum(max(0.0, cap - used) for cap, used in running) + new_cap


def _spent(store: Store, run_id: int) -> float:
    row = store.db.execute(
        "SELECT COALESCE(SUM(cost_usd), 0) FROM iterations WHERE run_id = ?", (run_id,)
    ).fetchone()
    return float(row[0])


def _wait_for(
    stack: contextlib.ExitStack,
    lock: Callable[[], contextlib.AbstractContextManager[object]],
    wait_s: float | None,
    stop: threading.Event,
) -> None:
    """Enter the lock context `lock()` makes, trying again while another process holds it,
    for at most `wait_s` seconds (None: until it is free or a stop is asked)."""
    deadline = None if wait_s is None else time.monotonic() + wait_s
    while True:
        try:
            stack.enter_context(lock())
            return
        except LockHeld:
            if stop.is_set() or (deadline is not None and time.monotonic() >= deadline):
                raise
        stop.wait(_POLL_S)


# -- the usage limit, shared ------------------------------------------------------------------
def share_usage_limit(settings: Settings, store: Store, resets_at: float | None, hits: int) -> None:
    """One slot's agent hit its usage limit: every slot waits for the reset (with one slot,
    only the task that hit it waits, as before)."""
    if settings.max_parallel > 1:
        until = usage_reset_at(settings, resets_at, hits).timestamp()
        known = usage_limit_until(settings, store)  # the latest reset holds
        store.put(USAGE_LIMIT_KEY, str(max(until, known.timestamp() if known else 0.0)))


def usage_limit_until(settings: Settings, store: Store) -> datetime | None:
    """The moment a usage limit a slot hit resets; None when none is in force."""
    if settings.max_parallel <= 1:
        return None
    value = store.get(USAGE_LIMIT_KEY)
    if not value or float(value) <= time.time():
        return None
    return datetime.fromtimestamp(float(value), UTC)


def shared_usage_wait(
    settings: Settings, store: Store, point: Callable[[str], WaitPoint]
) -> Path | None:
    """Before an agent call: with a usage limit in force that another slot hit, the task
    waits for its reset (a timed wait); None otherwise."""
    until = usage_limit_until(settings, store)
    if until is None:
        return None
    state = base_state(settings, point(""), "time", until)
    state.reason = "agent usage limit reached (in another slot)"
    state.wait_for = f"usage limit reset at {until.isoformat()}"
    return save_wait(settings, state)
