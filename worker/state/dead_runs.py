"""Runs whose process died before they closed their record (kill -9, the OOM killer, a power
cut): closed by the next run, so that `worker log`, `status` and `costs` agree.

A run records its task's result (`Store.record_result`) before it tells the source (the reply,
the move to `done/`, the issue comment), and closes the record after. A run found open whose
process is gone is closed here, holding the workspace lock:

- with a result recorded, the task was completed (or released) by the dead run: the result
  stands, and the reason code RUN_DIED_AFTER_RESULT says the record was closed later;
- without one, the outcome is `died`, the reason says when and by which run it was noticed.

Either way an iteration the dead run paid for but did not record (killed while the task's
checks ran, say) is read back from its output log, so its cost is counted.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from worker.process.platform.process import alive, start_time
from worker.state.store import Store
from worker.status import parse_status

log = logging.getLogger(__name__)

DIED = "died"  # a run's outcome when its process ended before it closed its record
DIED_AFTER_RESULT = "RUN_DIED_AFTER_RESULT"
RUN_DIED = "RUN_DIED"

# A mode's id -> the agent it runs (claude, codex, ...), or None when unknown.
AgentOf = Callable[[str], str | None]


def close_dead_runs(
    store: Store, machine_id: str, logs: Path, agent_of: AgentOf, by_run: int
) -> list[int]:
    """Close this machine's open runs whose process is gone; the run ids."""
    closed = []
    rows = store.db.execute(
        "SELECT * FROM runs WHERE ended_at IS NULL AND machine_id = ? AND id != ? ORDER BY id",
        (machine_id, by_run),
    ).fetchall()
    for row in rows:
        run = dict(row)
        if not _gone(run):
            continue
        _close(store, run, logs, agent_of, by_run)
        closed.append(int(run["id"]))
    return closed


def _gone(run: dict[str, Any]) -> bool:
    """The run's process has ended, or its pid now names a process started after the run."""
    pid = int(run["pid"])
    if pid == os.getpid():
        return False  # a run of this process (`worker serve`) that is still on its way
    if not alive(pid):
        return True
    started = start_time(pid)
    return started is not None and float(started) > float(run["started_at"]) + 1.0


def _close(store: Store, run: dict[str, Any], logs: Path, agent_of: AgentOf, by_run: int) -> None:
    run_id = int(run["id"])
    decision = store.decision_for_run(run_id) or {}
    mode = str(decision.get("mode") or "")
    _recover_iterations(store, run_id, logs / f"run-{run_id}", mode, agent_of(mode) or "")
    spent, count, modes = _spent(store, run_id)
    noticed = datetime.now(UTC).isoformat(timespec="seconds")
    why = f"its process (pid {run['pid']}) was gone when run {by_run} looked at {noticed}"
    codes = json.loads(run["reason_codes"] or "[]")
    fields: dict[str, Any] = {"cost_usd": max(spent, float(run["cost_usd"] or 0.0))}
    if run["outcome"]:
        fields["reason_codes"] = [*codes, DIED_AFTER_RESULT]
        fields["reason"] = f"{run['reason'] or ''} (record closed later: {why})".strip()
    else:
        fields.update(
            task_id=run["task_id"] or decision.get("task_id"),
            source=run["source"] or decision.get("source"),
            outcome=DIED,
            reason=f"the run died before it ended: {why}",
            reason_codes=[*codes, RUN_DIED],
            iterations=count,
            modes=modes,
        )
    log.warning("run %s died before it ended: %s", run_id, why)
    store.finish_run(run_id, **fields)


def _recover_iterations(store: Store, run_id: int, folder: Path, mode: str, agent: str) -> None:
    """Add the iterations whose output log exists but whose row the dead run never wrote."""
    recorded = {row["seq"] for row in store.iterations_of(run_id)}
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("iteration-*.jsonl")):
        seq = _seq(path)
        if seq is None or seq in recorded:
            continue
        from worker.agents.registry import replay_log  # an adapter's parser, for a dead run only

        result = replay_log(agent, path)
        if result is None:
            continue
        status = parse_status(result.final_text)
        store.add_iteration(
            run_id,
            seq,
            mode=mode or "?",
            model="?",
            iteration=seq,
            status=status.status or "continue",
            reason=(status.reason or "read back from the output log of a run that died")[:500],
            reason_code=RUN_DIED,
            duration_s=0.0,
            cost_usd=result.cost_usd,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            exit_code=None,
        )


def _seq(path: Path) -> int | None:
    digits = path.stem.removeprefix("iteration-")
    return int(digits) if digits.isdigit() else None


def _spent(store: Store, run_id: int) -> tuple[float, int, list[str]]:
    rows = store.iterations_of(run_id)
    modes: list[str] = []
    for row in rows:
        if row["mode"] not in modes and row["mode"] != "?":
            modes.append(str(row["mode"]))
    return sum(float(row["cost_usd"]) for row in rows), len(rows), modes
