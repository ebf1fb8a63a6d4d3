"""The library behind `worker waits`, `worker intercom` and `worker status`: each function
takes settings and keyword arguments and returns plain data for one renderer."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from worker.config import Settings
from worker.errors import UsageError
from worker.models import Outcome
from worker.process.locking import workspace_lock
from worker.state import statedir
from worker.state.store import Store
from worker.waits import authored, intercom, record
from worker.waits.ledger import CheckRow, Ledger, WaitCode
from worker.waits.state import WaitState, file_name, load_wait_state, wait_state_files

# Routes the store's claims where the run would (a fleet's database); the command line
# passes `worker.fleet.fleet_session`, which this layer may not import.
Attach = Callable[[Settings, Store], contextlib.AbstractContextManager[Any]]
# How long `waits cancel`, `adopt` and `prune` wait for a slot's run to finish scheduling (its
# snapshot, decision and claim hold the workspace lock for a few seconds) before exit 75.
SCHEDULING_WAIT_S = 30.0


@contextlib.contextmanager
def _ledger(settings: Settings, create: bool = False) -> Iterator[Ledger | None]:
    if not create and not settings.db_path.exists():
        yield None
        return
    with Store(settings.db_path) as store:
        yield Ledger(store)


@contextlib.contextmanager
def _run_lock(settings: Settings, attach: Attach | None = None) -> Iterator[Store]:
    """The workspace's run lock: no run resumes a wait while we end it. With `attach`, the
    claims a wait's end releases are the fleet's, as in a run. With slots (`max_parallel` >
    1) a run holds it only while it schedules, seconds: it is waited for, not refused."""
    busy = "a worker run is active in this workspace; try again when it ends"
    wait_s = SCHEDULING_WAIT_S if settings.max_parallel > 1 else 0.0
    with contextlib.ExitStack() as stack:
        stack.enter_context(workspace_lock(settings, busy, wait_s))
        store = stack.enter_context(Store(settings.db_path))
        if attach is not None:
            stack.enter_context(attach(settings, store))
        yield store


def _row(
    path: Path, state: WaitState, settings: Settings, checks: dict[str, CheckRow], now: datetime
) -> dict[str, Any]:
    check = checks.get(path.name)
    if check is not None and check.stamp != state.since.isoformat():
        check = None  # a row of an earlier wait of the same task
    return {
        "task_id": state.task_id,
        "file": path.name,
        "source": state.source,
        "resume_when": state.resume_when,
        "wait_for": state.wait_for,
        "reason": state.reason,
        "since": state.since.isoformat(),
        "waiting_s": round((now - state.since).total_seconds()),
        "expires_at": state.expiry(settings.waits.expiry_days).isoformat(),
        "resume_at": state.resume_at.isoformat() if state.resume_at else None,
        "mode": state.context.mode,
        "iteration": state.context.iteration,
        "resume_brief": state.resume_brief,
        "last_checked": (
            datetime.fromtimestamp(check.checked_at, UTC).isoformat()
            if check is not None and check.checked_at
            else None
        ),
        "ready": check is not None and check.answer is not None,
        # Where the pull request stood at the last look (`worker.waits.github_pr`).
        "pull_request": (
            check.seen if check is not None and state.resume_when == "pull_request" else None
        ),
    }


def list_waits(settings: Settings, now: datetime | None = None) -> dict[str, Any]:
    now = now or datetime.now(UTC)
    rows, bad, waits = [], [], []
    with _ledger(settings) as ledger:
        checks = ledger.checks() if ledger else {}
        records = record.recorded(settings, ledger.store if ledger else None)
        for path in wait_state_files(settings.wait_states):
            state, problem = record.check(path, records)
            if state is not None:
                rows.append(_row(path, state, settings, checks, now))
                waits.append((path, state))
            if problem is not None:
                bad.append(problem)
    _ready_now(settings, rows, waits, now)
    rows.sort(key=lambda r: r["since"])
    rejected = settings.wait_states / "rejected"
    count = len(list(rejected.glob("*.json"))) if rejected.is_dir() else 0
    return {"waits": rows, "unreadable": bad, "quarantined": count}


def _ready_now(
    settings: Settings,
    rows: list[dict[str, Any]],
    waits: list[tuple[Path, WaitState]],
    now: datetime,
) -> None:
    """A wait the last run found not ready may be ready now (an approval given since, its
    moment come): asked of the local conditions, read only, no request to GitHub."""
    pending = {row["file"]: row for row in rows if not row["ready"]}
    if not pending:
        return
    from worker.waits.checking import check  # the conditions: only with a wait not ready
    from worker.waits.phase0 import WaitScan

    live = [(path, state) for path, state in waits if path.name in pending]
    found = WaitScan()
    check(
        settings,
        None,
        live,
        ledger=None,
        rows={},
        stamps={},
        now=now,
        dry_run=True,
        github=None,
        result=found,
    )
    for ready in found.ready:
        name = getattr(ready.ref, "name", None)  # the wait's file
        if name in pending:
            pending[name]["ready"] = True


def find(settings: Settings, ident: str) -> tuple[Path, WaitState]:
    """A wait by task id, file name or file stem; UsageError naming the known ones if none."""
    waits = record.trusted(settings, wait_state_files(settings.wait_states))
    names = {ident, f"{ident}.json", file_name(ident)}
    for path, state in waits:
        if path.name in names:
            return path, state
    for path, state in waits:
        if state.task_id == ident:
            return path, state
    known = ", ".join(p.stem for p in wait_state_files(settings.wait_states)[:10]) or "none"
    raise WaitNotFound(
        ident, f"no wait state {ident!r} (waiting: {known}); see `worker waits list`"
    )


class WaitNotFound(UsageError):
    """No wait of that name on this machine (on a fleet, it may wait on another one)."""

    def __init__(self, ident: str, message: str) -> None:
        super().__init__(message)
        self.ident = ident


def adopt(settings: Settings, ident: str) -> dict[str, Any]:
    """Take a wait-state file that worker did not write (the specification's own tool, a
    file restored by hand) as a wait: the person at this terminal vouches for it."""
    with _run_lock(settings) as store:
        path = settings.wait_states / (ident if ident.endswith(".json") else f"{ident}.json")
        if path.parent != settings.wait_states or not path.is_file():
            raise UsageError(f"no wait-state file {path.name} in {settings.wait_states}")
        state = load_wait_state(path)
        replaced = path.name in record.recorded(settings, store)
        record.save_wait(settings, state, store, name=path.name)
        who = authored.os_user()
        Ledger(store).log(state.task_id, WaitCode.WAIT_ADOPTED, f"{path.name} by {who}")
    return {"task_id": state.task_id, "file": path.name, "by": who, "replaced": replaced}


def show(settings: Settings, ident: str) -> dict[str, Any]:
    path, state = find(settings, ident)
    with _ledger(settings) as ledger:
        row = _row(path, state, settings, ledger.checks() if ledger else {}, datetime.now(UTC))
        events = ledger.log_of(state.task_id) if ledger else []
    notes = intercom.read_notes(settings, intercom.root(settings) / path.stem, quarantine_bad=False)
    return {
        **row,
        "state": state.model_dump(mode="json", by_alias=True, exclude_none=True),
        "notes": [{"file": p.name, **n.model_dump(mode="json")} for p, n in notes],
        "log": events,
    }


def note(
    settings: Settings, ident: str, kind: intercom.Kind, text: str = "", by: str | None = None
) -> dict[str, Any]:
    """Write an approval, a rejection or a message into the local intercom."""
    folder: Path | None = None  # the wait's own notes folder, named like its file
    if kind == "message":
        try:
            path, state = find(settings, ident)
            task_id, folder = state.task_id, intercom.root(settings) / path.stem
        except UsageError:
            task_id = ident  # a message may be left for a task that does not wait yet
    else:
        path, state = find(settings, ident)
        task_id, folder = state.task_id, intercom.root(settings) / path.stem
        if state.condition in (
            "roosync_response",
            "github_decision",
            "intercom_message",
            "time",
        ):
            raise UsageError(
                f"{task_id} waits for {state.resume_when}, not an approval; "
                "use `worker intercom send` for a message"
            )
        from worker.waits.conditions import allowed_locally  # not for `worker status`

        if not allowed_locally(state, by, settings):
            raise UsageError(
                f"{by} is not an allowed approver of {task_id} "
                f"({WaitCode.APPROVER_NOT_ALLOWED}); allowed: "
                f"{', '.join(state.approvers or settings.waits.approvers)}"
            )
    written = intercom.write_note(settings, task_id, kind, text, by, folder=folder)
    with _ledger(settings, create=True) as ledger:
        if ledger is not None:
            code = WaitCode.MESSAGE_NOTED if kind == "message" else WaitCode.APPROVAL_NOTED
            ledger.log(task_id, code, f"{kind} by {by or 'the local user'}")
    from worker.kernel.control import order_of_text

    found = order_of_text(text) if kind == "message" else None
    return {
        "task_id": task_id,
        "kind": kind,
        "by": by,
        "note": str(written),
        "order": found[0].value if found else None,  # `/pause ...`: an order, not an answer
    }


def cancel(
    settings: Settings, ident: str, reason: str = "", attach: Attach | None = None
) -> dict[str, Any]:
    """End a wait as cancelled, reported to its source; its notes are consumed."""
    from worker.waits.expiry import end_wait  # not for `worker status`

    with _run_lock(settings, attach) as store:
        path, state = find(settings, ident)
        why = reason or "cancelled by the local user"
        if not end_wait(
            settings, store, path, state, Outcome.CANCELLED, why, WaitCode.WAIT_CANCELLED
        ):
            raise UsageError(
                f"could not report the cancellation of {state.task_id} to its "
                "source; nothing was changed (see `worker waits show`)"
            )
        notes = intercom.read_notes(
            settings, intercom.root(settings) / path.stem, quarantine_bad=False
        )
        intercom.consume([p for p, _ in notes])
    return {"task_id": state.task_id, "outcome": Outcome.CANCELLED.value, "reason": why}


def prune(
    settings: Settings, now: datetime | None = None, attach: Attach | None = None
) -> dict[str, Any]:
    """Expire the waits past their expiry now, and drop intercom folders of tasks that no
    longer wait and were last touched before the expiry period."""
    from worker.waits import phase0

    now = now or datetime.now(UTC)
    with _run_lock(settings, attach) as store:
        scan = phase0.scan(settings, store, now=now, github=_NoGitHub())
        waiting = {p.stem for p in wait_state_files(settings.wait_states)}
        removed = []
        root = intercom.root(settings)
        horizon = now.timestamp() - settings.waits.expiry_days * 86400
        for folder in sorted(root.iterdir()) if root.is_dir() else []:
            if folder.is_dir() and folder.name not in waiting and _newest(folder) < horizon:
                shutil.rmtree(folder)
                removed.append(folder.name)
    return {
        "expired": scan.expired,
        "quarantined": len(scan.errors),
        "intercom_removed": removed,
        "waiting": len(waiting),
    }


class _NoGitHub:
    """`prune` only expires: it asks GitHub nothing."""

    costed = 0
    client = None

    def updated(self, repo: str, since: datetime) -> dict[int, datetime]:
        return {}

    def comments(self, repo: str, number: int, since: datetime) -> list[Any]:
        return []

    def events(self, repo: str, number: int, since: datetime) -> list[Any]:
        return []

    def may_approve(self, repo: str, login: str) -> bool:
        return False


def _newest(folder: Path) -> float:
    return max((p.stat().st_mtime for p in folder.rglob("*")), default=folder.stat().st_mtime)


def status(settings: Settings) -> dict[str, Any]:
    listing = list_waits(settings)
    last = None
    if settings.db_path.exists():
        with Store(settings.db_path) as store:
            runs = store.recent_runs(1)
            last = runs[0] if runs else None
    return {
        "workspace": str(settings.workspace),
        "machine_id": settings.machine_id,
        "state": statedir.describe(settings),
        "waiting": listing["waits"],
        "quarantined": listing["quarantined"],
        "last_run": last
        and {
            k: last.get(k) for k in ("id", "started_at", "task_id", "source", "outcome", "reason")
        },
    }
