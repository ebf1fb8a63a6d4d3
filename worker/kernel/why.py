"""The service behind `worker why`: find the run's decision event and explain it."""

from __future__ import annotations

from typing import Any

from worker.config import Settings
from worker.errors import UsageError
from worker.kernel.explain import explain
from worker.state.store import Store


def explain_run(settings: Settings, run_id: int | None = None) -> dict[str, Any]:
    if not settings.db_path.exists():
        raise UsageError(f"no runs yet in {settings.workspace}; `worker run` records them")
    with Store(settings.db_path) as store:
        if run_id is None:
            latest = store.recent_decisions(1)
            if not latest:
                raise UsageError("no decision recorded yet; `worker run` records one per run")
            event = latest[0]
            run_id = event["run_id"]
        else:
            found = store.decision_for_run(run_id)
            if found is None:
                raise UsageError(f"run {run_id} has no decision event; `worker log` lists runs")
            event = found
        run = next(
            (r for r in store.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,))), None
        )
        run_row = _decode(dict(run)) if run is not None else None
    return {
        "run_id": run_id,
        "explanation": explain(event, run_row),
        "decision": event,
        "run": run_row,
    }


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    import json

    for key in ("modes", "reason_codes"):
        if isinstance(row.get(key), str):
            row[key] = json.loads(row[key])
    return row
