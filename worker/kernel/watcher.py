"""The stop watcher: while a task runs, obey the orders that target it, within a second or so.

A thread polls the orders (`orders.read_orders`: the control folder, the inbox and the
intercom every tick; GitHub comments at most every `[github] control_poll_s`, answered from
memory in between) and asks the same pure `decide` with the running task in the snapshot.
On a stop or pause it sets the run's stop flag and ends the agent's process group at once
(the loop would only notice the flag at the agent's next output line). After the loop,
`settle` turns the stopped result into `cancelled` (or `waiting`, for a pause) and consumes
the orders; the caller then reports to the task's source and releases the claim.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from types import TracebackType

from worker.config import Settings
from worker.kernel import control
from worker.kernel.decide import decide
from worker.kernel.model import Act, Action, ControlOrder, Reason, Snapshot
from worker.kernel.orders import read_orders
from worker.models import Outcome, Task, TaskResult
from worker.waits.saving import WaitPoint, save_pause

log = logging.getLogger(__name__)

POLL_S = 1.0
_GRACE_S = 3.0


class StopWatcher:
    def __init__(
        self, settings: Settings, task: Task, stop: threading.Event, poll_s: float = POLL_S
    ) -> None:
        self.settings = settings
        self.task = task
        self.stop = stop
        self.poll_s = poll_s
        self.taken: Action | None = None
        self.orders: list[ControlOrder] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="kernel-stop-watcher", daemon=True)

    def __enter__(self) -> StopWatcher:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done.set()
        self._thread.join(timeout=10.0)

    def _watch(self) -> None:
        while not self._done.wait(self.poll_s):
            try:
                if self.check():
                    return
            except Exception as exc:  # the watcher must never take the run down
                log.warning("stop watcher: %s", exc, exc_info=True)

    def check(self) -> bool:
        """One look at the orders; True when the running task was stopped or paused."""
        orders = [o for o in read_orders(self.settings) if o.targets(self.task.id)]
        if not orders:
            return False
        snap = Snapshot(running=self.task, controls=tuple(orders), now=time.time())
        decision = decide(snap)
        for action in decision.actions:
            if action.act in (Act.STOP_RUNNING, Act.PAUSE_RUNNING):
                self.taken = action
                self.orders = [o for o in orders if o.trusted]
                log.warning("kernel: %s %s (%s)", action.act.value, self.task.id, action.detail)
                self.stop.set()  # run_process ends the agent's process group within ~0.2 s
                return True
        return False

    def settle(self, result: TaskResult, mode_id: str) -> TaskResult:
        """After the loop: a task stopped by an order is cancelled (or paused into a wait
        state), its work kept; the orders are consumed. A task that ended on its own before
        the order arrived keeps its outcome, and the order stays for the next run."""
        action = self.taken
        if action is None or result.outcome not in (Outcome.STOPPED, Outcome.FAILURE):
            return result
        result.reason_codes += [Reason.SAFETY_OVERRIDE, action.reason]
        if action.act is Act.PAUSE_RUNNING:
            result.wait_state = _save_pause(self.settings, self.task, result, mode_id, action)
            result.outcome, result.reason = Outcome.WAITING, f"paused: {action.detail}"
        else:
            result.outcome, result.reason = Outcome.CANCELLED, f"cancelled: {action.detail}"
        for order in self.orders:
            control.consume(order, f"{action.reason}: {self.task.id} {result.outcome.value}")
        return result


def _save_pause(
    settings: Settings, task: Task, result: TaskResult, mode_id: str, action: Action
) -> Path:
    last = result.iterations[-1] if result.iterations else None
    point = WaitPoint(
        task,
        result.mode or mode_id,
        last.model if last else "",
        last.iteration if last else 1,
        result.final_text,
        result.session_id,
        result.modes,
        result.cost_usd,
    )
    return save_pause(settings, point, action.detail)
