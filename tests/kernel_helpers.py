"""Builders for kernel snapshots (shared by the tests/test_kernel_*.py files)."""

from __future__ import annotations

from pathlib import Path

from worker.kernel.model import (
    ControlOrder,
    Order,
    ReadyWait,
    ReplySignal,
    Snapshot,
    StaleItem,
    WaitingFlow,
)
from worker.models import Task
from worker.sources.base import Listing

NOW = 1_800_000_000.0


def task(task_id: str, source: str = "inbox") -> Task:
    return Task(id=task_id, source=source, title=f"title of {task_id}")


def listing(source: str, *ids: str) -> Listing:
    return Listing(source, [task(i, source) for i in ids])


def ready(task_id: str, since: float = NOW - 100) -> ReadyWait:
    return ReadyWait(task(task_id), since, "approved", Path(f"/w/{task_id}.json"))


def waiting(task_id: str, brief: str = "", last: float | None = NOW - 50) -> WaitingFlow:
    return WaitingFlow(task(task_id), brief, last, Path(f"/w/{task_id}.json"))


def order(
    task_id: str,
    what: Order = Order.CANCEL,
    *,
    trusted: bool = True,
    at: float = NOW - 10,
    origin: str = "cli",
    oid: str | None = None,
) -> ControlOrder:
    return ControlOrder(
        oid or f"o-{what.value}-{task_id}", what, task_id, origin, "because", "alice", at, trusted
    )


def stale(item_id: str, kind: str = "claim", work: bool = False) -> StaleItem:
    return StaleItem(kind, item_id, "LEASE_EXPIRED" if kind == "claim" else "CLAIM_GONE", work)


def reply(
    task_id: str,
    signal: str,
    confidence: float,
    acts: bool,
    trusted: bool = True,
    may_stop: bool = True,
) -> ReplySignal:
    return ReplySignal(
        f"r-{task_id}-{signal}", task_id, signal, confidence, acts, "bob", trusted, may_stop
    )


def snap(**fields: object) -> Snapshot:
    fields.setdefault("now", NOW)
    return Snapshot(**fields)  # type: ignore[arg-type]
