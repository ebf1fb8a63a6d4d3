"""Reports that could not reach GitHub when their task ended, kept in SQLite (kv
`github:reports-pending`, by task id) for the next listing to send again. Until then the
issue is not offered as a task: on GitHub it still looks claimed, and would be taken again
once its claim expired. Text is redacted before it is stored."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from worker.models import IterationRecord, Outcome, Task, TaskResult
from worker.process.proc import redact
from worker.sources.github.selection import SOURCE
from worker.state.store import Store

KEY = "github:reports-pending"
log = logging.getLogger(__name__)


def pending(store: Store | None) -> dict[str, Any]:
    raw = store.get(KEY) if store is not None else None
    try:
        found = json.loads(raw) if raw else {}
    except ValueError:
        found = {}
    return found if isinstance(found, dict) else {}


def keep(store: Store | None, task_id: str, entry: dict[str, Any] | None) -> None:
    """Remember a report to send again (`entry`), or forget it (None)."""
    if store is None:
        return
    found = pending(store)
    if entry is None and task_id not in found:
        return
    if entry is None:
        del found[task_id]
    else:
        found[task_id] = entry
    store.put(KEY, json.dumps(found))


def retry(
    store: Store | None,
    send: Callable[[Task, TaskResult], None],
    gone: Callable[[Task], bool],
    errors: list[str],
) -> set[str]:
    """Send the reports that failed before (`send` forgets each one delivered); the ids of
    those still pending. A report whose issue is `gone` is dropped."""
    still = set()
    for task_id, entry in pending(store).items():
        try:
            task, result = result_from_json(entry)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("github: dropping an unreadable pending report of %s: %s", task_id, exc)
            keep(store, task_id, None)
            continue
        try:
            send(task, result)
        except Exception as exc:
            if gone(task):
                keep(store, task_id, None)
                continue
            errors.append(f"github: report of {task_id} still pending: {exc}")
            still.add(task_id)
    return still


def result_to_json(task: Task, result: TaskResult) -> dict[str, Any]:
    """What a report needs, as JSON, to be sent again by a later run (text redacted)."""
    return {
        "task": {
            "id": task.id,
            "title": task.title,
            "ref": {k: v for k, v in task.ref.items() if isinstance(v, str | int | float | bool)},
        },
        "result": {
            "outcome": result.outcome.value,
            "reason": redact(result.reason),
            "reason_codes": list(result.reason_codes),
            "modes": list(result.modes),
            "iterations": [{**asdict(r), "steering": []} for r in result.iterations],
            "duration_s": result.duration_s,
            "cost_usd": result.cost_usd,
            "branch": result.branch,
            "final_text": redact(result.final_text[-3000:]),
            "anomalies": [redact(a) for a in result.anomalies[:5]],
        },
    }


def result_from_json(data: dict[str, Any]) -> tuple[Task, TaskResult]:
    """The inverse of `result_to_json`; KeyError, TypeError or ValueError when malformed."""
    task = Task(
        id=str(data["task"]["id"]),
        source=SOURCE,
        title=str(data["task"]["title"]),
        ref=dict(data["task"]["ref"]),
    )
    fields = dict(data["result"])
    outcome = Outcome(fields.pop("outcome"))
    iterations = [IterationRecord(**r) for r in fields.pop("iterations")]
    return task, TaskResult(task, outcome, iterations=iterations, **fields)
