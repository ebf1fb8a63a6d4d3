"""Phase 0: before anything new, expire stale waits and find those whose condition is met.

Order of one pass: read the waits as worker recorded them (a file worker did not write, or
one edited since, is moved to `rejected/` with its reason; the others still count), settle
the waits resumed by an earlier run (consume their answers), expire those past their expiry
(reported to their source), then ask each condition about its waits in one batched look. A
remote look at a wait happens at most every `recheck_interval_s` (a pull request whose checks
run or failed: every run, with conditional requests); an answer found once is kept until the
wait is resumed.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from worker.config import Settings
from worker.kernel.scheduling import ReadyWait
from worker.process.platform.process import alive
from worker.state.fsutil import opened_folder
from worker.state.store import Store
from worker.waits import intercom, record
from worker.waits.ledger import CheckRow, Ledger, WaitCode
from worker.waits.state import WaitState, task_of, wait_state_files

if TYPE_CHECKING:
    from worker.kernel.model import TaskEnd
    from worker.waits.github_look import GitHubLook

__all__ = ["WaitScan", "remove", "scan", "task_of", "trusted_waits"]

# The waits the last pass read, by folder: the folder as it was after the pass (its mtime and
# its files' names: a coarse mtime can miss a change), when, and the waits. The kernel's view of
# the same run (`trusted_waits`) takes them instead of reading every file again.
_read: dict[str, tuple[tuple[int, frozenset[str]], float, list[tuple[Path, WaitState]]]] = {}
_READ_MAX_AGE_S = 2.0


@dataclass
class WaitScan:
    ready: list[ReadyWait] = field(default_factory=list)
    pending: int = 0
    errors: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)  # task ids ended as expired this run
    ended: list[str] = field(default_factory=list)  # task ids ended by their condition
    ends: list[TaskEnd] = field(default_factory=list)  # the same, as the run records them
    seen: list[str] = field(default_factory=list)  # what the looks at pull requests saw, in words
    consumed: int = 0  # answers moved to done/ after their task was resumed
    github_requests: int = 0  # requests that cost rate limit (a 304 does not)


def scan(
    settings: Settings,
    store: Store | None,
    now: datetime | None = None,
    dry_run: bool = False,
    github: GitHubLook | None = None,
) -> WaitScan:
    now = now or datetime.now(UTC)
    result = WaitScan()
    ledger = Ledger(store) if store is not None and not dry_run else None
    rows = ledger.checks() if ledger is not None else {}
    loaded = _load(settings, store, result, dry_run)
    stamps = {p.name: _stamp(s) for p, s in loaded}  # each wait instance's ledger stamp
    if ledger is not None:
        result.consumed = _settle(ledger, rows, stamps)
    expired = [(p, s) for p, s in loaded if s.expiry(settings.waits.expiry_days) <= now]
    if expired and not dry_run:
        from worker.waits.expiry import expire  # only with a wait past its expiry

        result.expired = expire(settings, store, expired, now)
    gone = {p for p, _ in expired}
    live = [(p, s) for p, s in loaded if p not in gone] if gone else loaded
    if live:
        # The conditions and their lookups: only with a wait to look at (most runs: none).
        from worker.waits.checking import check

        github = check(
            settings,
            store,
            live,
            ledger=ledger,
            rows=rows,
            stamps=stamps,
            now=now,
            dry_run=dry_run,
            github=github,
            result=result,
        )
    if store is not None and not dry_run:
        _release_dead_claims(settings, store, ledger, result.ready)
    result.github_requests = getattr(github, "costed", 0)
    _keep(settings.wait_states, loaded if dry_run else live)  # a dry run expires nothing
    return result


def _keep(folder: Path, waits: list[tuple[Path, WaitState]]) -> None:
    with contextlib.suppress(OSError):
        _read[str(folder)] = (_looks(folder), time.monotonic(), waits)


def _looks(folder: Path) -> tuple[int, frozenset[str]]:
    return folder.stat().st_mtime_ns, frozenset(os.listdir(folder))


def trusted_waits(settings: Settings) -> list[tuple[Path, WaitState]]:
    """The waits worker recorded (the others are phase 0's to set aside): the ones phase 0
    has just read while their folder is unchanged, else read now."""
    folder = settings.wait_states
    kept = _read.get(str(folder))
    with contextlib.suppress(OSError):
        if (
            kept is not None
            and time.monotonic() - kept[1] < _READ_MAX_AGE_S
            and kept[0] == _looks(folder)
        ):
            return kept[2]
    return record.trusted(settings, wait_state_files(folder))


def _load(
    settings: Settings, store: Store | None, result: WaitScan, dry_run: bool
) -> list[tuple[Path, WaitState]]:
    """The waits as worker recorded them. A file it did not write, or one that was edited, is
    set aside with its reason (the recorded wait written back); an unreadable one too."""
    ledger = Ledger(store) if store is not None and not dry_run else None
    if ledger is not None:
        for name in record.adopt_on_upgrade(settings, ledger.store):
            ledger.log(Path(name).stem, WaitCode.WAIT_ADOPTED, f"{name} at the upgrade")
    records = record.recorded(settings, store)
    loaded = []
    with opened_folder(settings.wait_states) as fd:
        for path in wait_state_files(settings.wait_states):
            try:
                state, problem = record.check(path, records, fd)
            except ValidationError as exc:  # a record of an older, incompatible format
                state, problem = None, f"{path.name}: unreadable record: {exc.error_count()} errors"
            if problem is not None:
                result.errors.append(problem)
                if not dry_run:
                    record.enforce(path, records, problem)
                if ledger is not None:
                    code = WaitCode.WAIT_STATE_EDITED if state else WaitCode.WAIT_STATE_UNRECORDED
                    ledger.log(state.task_id if state else path.stem, code, problem)
            if state is not None:
                loaded.append((path, state))
    if ledger is not None:
        record.remember_verified(ledger.store, records)
    return loaded


def _settle(ledger: Ledger, rows: dict[str, CheckRow], current: dict[str, str]) -> int:
    """A wait whose file is gone, or holds a newer wait, was resumed and its run ended:
    its answers are consumed now (moved to `done/`), so they never answer twice."""
    gone = [row for key, row in rows.items() if current.get(key) != row.stamp]
    moved = 0
    for row in gone:
        if row.answer is not None and row.consume:
            moved += intercom.consume([Path(p) for p in row.consume])
            ledger.log(
                row.task_id, WaitCode.ANSWER_CONSUMED, ", ".join(Path(p).name for p in row.consume)
            )
        rows.pop(row.key)
    ledger.forget([row.key for row in gone])
    return moved


def _release_dead_claims(
    settings: Settings, store: Store, ledger: Ledger | None, ready: list[ReadyWait]
) -> None:
    """A run that died while resuming left its claim: the wait is resumed again. Only this
    machine's claims whose process is gone are released (the workspace lock is ours)."""
    for wait in ready:
        claim = store.claim_of(wait.task.id)
        if (
            claim is None
            or claim["state"] != "active"
            or claim["source"] != "wait"
            or claim["machine_id"] != settings.machine_id
            or alive(claim["pid"])  # never os.kill(pid, 0): it terminates on Windows
        ):
            continue
        store.release_claim(wait.task.id, "released")
        if ledger is not None:
            ledger.log(
                wait.task.id,
                WaitCode.WAIT_RESUME_INTERRUPTED,
                f"run {claim['run_id']} (pid {claim['pid']}) died while resuming",
            )


def _stamp(state: WaitState) -> str:
    return state.since.isoformat()


def remove(path: Path) -> None:
    path.unlink(missing_ok=True)
