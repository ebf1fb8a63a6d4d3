"""Phase 0: before anything new, expire stale waits and find those whose condition is met.

Order of one pass: read the waits as worker recorded them (a file worker did not write, or
one edited since, is moved to `rejected/` with its reason; the others still count), settle
the waits resumed by an earlier run (consume their answers), expire those past their expiry
(reported to their source), then ask each condition about its waits in one batched look. A
remote look at a wait happens at most every `recheck_interval_s`; an answer found once is
kept until the wait is resumed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from worker.config import Settings
from worker.fsutil import opened_folder
from worker.platform.process import alive
from worker.scheduling import ReadyWait
from worker.store import Store
from worker.waits import intercom, record
from worker.waits.builtin import registry
from worker.waits.conditions import CheckContext, Verdict, Waiting, trust_of
from worker.waits.expiry import expire
from worker.waits.ledger import CheckRow, Ledger, WaitCode
from worker.waits.lookups import Lookups
from worker.waits.state import WaitState, task_of, wait_state_files

if TYPE_CHECKING:
    from worker.waits.github_look import GitHubLook

log = logging.getLogger(__name__)

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
        result.expired = expire(settings, store, expired, now)
    gone = {p for p, _ in expired}
    live = [(p, s) for p, s in loaded if p not in gone] if gone else loaded
    waits, known = _waitings(settings, live, rows, now)
    lookups = Lookups(settings, dry_run=dry_run, store=None if dry_run else store)
    ctx = CheckContext(settings, now, lookups)
    if github is None and ledger is not None and _needs_github(waits):
        github = _client_look(settings, store)
    ctx.github = github
    verdicts: dict[str, Verdict] = dict(known)
    by_kind: dict[str, list[Waiting]] = {}
    for wait in waits:
        if wait.key not in known:
            by_kind.setdefault(wait.kind, []).append(wait)
    for condition in registry():
        mine = by_kind.get(condition.name)
        if mine:
            for wait, verdict in zip(mine, condition.check(ctx, mine), strict=True):
                verdicts[wait.key] = verdict
    if ledger is not None:
        _remember(ledger, waits, verdicts, rows, stamps, now, settings)
    for wait in waits:
        verdict = verdicts.get(wait.key) or Verdict()
        if verdict.answer is None:
            result.pending += 1
            continue
        result.ready.append(
            ReadyWait(
                task_of(wait.state, settings.inbox),
                wait.since.timestamp(),
                verdict.answer,
                wait.path,
            )
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


def _waitings(
    settings: Settings,
    live: list[tuple[Path, WaitState]],
    rows: dict[str, CheckRow],
    now: datetime,
) -> tuple[list[Waiting], dict[str, Verdict]]:
    interval, now_s = settings.waits.recheck_interval_s, now.timestamp()
    waits, known = [], {}
    for path, state in live:
        # Its condition is a known one: worker.waits.validate checked it when it was read.
        wait = Waiting(path, state, state.condition)
        row = rows.get(wait.key)
        if row is not None:
            wait.seen, wait.checked_at = row.seen, row.checked_at
            wait.due = now_s - row.checked_at >= interval
            if row.answer is not None and row.trust != trust_of(state, settings):
                # Found under other allow-lists: the conditions judge the approver again,
                # the remote one with a fresh look.
                wait.seen, wait.due = None, True
            elif row.answer is not None:
                known[wait.key] = Verdict(row.answer, list(row.consume), seen=row.seen)
        waits.append(wait)
    return waits, known


def _client_look(settings: Settings, store: Store | None) -> GitHubLook | None:
    from worker.waits.github_look import ClientLook  # GitHub's parts: only with a wait on it

    try:
        from worker.sources.github.client import make_client

        return ClientLook(make_client(settings.github, store))
    except Exception as exc:  # no client: the GitHub conditions wait, the rest goes on
        log.warning("waits: no GitHub client: %s", exc)
        return None


def _needs_github(waits: list[Waiting]) -> bool:
    # A wait can be on a GitHub issue only with a repository in its source or a `#` in its
    # task id (`issue_of`): GitHub's parts are imported only for those (most runs: none).
    maybe = [
        w
        for w in waits
        if w.due
        and w.kind in ("user_approval", "github_decision")
        and ("repo" in w.state.source_ref or "#" in w.state.task_id)
    ]
    if not maybe:
        return False
    from worker.waits.github_checks import issue_of

    return any(issue_of(w) for w in maybe)


def _remember(
    ledger: Ledger,
    waits: list[Waiting],
    verdicts: dict[str, Verdict],
    rows: dict[str, CheckRow],
    stamps: dict[str, str],
    now: datetime,
    settings: Settings,
) -> None:
    changed = []
    for wait in waits:
        verdict = verdicts.get(wait.key) or Verdict()
        old = rows.get(wait.key)
        if old is not None and _as_before(old, wait, verdict, stamps[wait.key]):
            continue  # not met and not looked at, as at the last run: most waits, most runs
        for code, detail in verdict.ignored:
            log.warning("waits: %s: %s (%s)", wait.state.task_id, code, detail)
            ledger.log(wait.state.task_id, code, detail, once=True)
        row = CheckRow(
            wait.key,
            stamps[wait.key],
            wait.state.task_id,
            now.timestamp() if verdict.looked_remote else (old.checked_at if old else 0.0),
            verdict.answer,
            verdict.consume if verdict.answer is not None else [],
            verdict.seen or wait.seen,
            trust_of(wait.state, settings) if verdict.answer is not None else None,
        )
        if old != row:
            if verdict.answer is not None and (old is None or old.answer is None):
                ledger.log(row.task_id, WaitCode.WAIT_READY, verdict.answer[:200])
            changed.append(row)
    ledger.record(changed)


def _as_before(old: CheckRow, wait: Waiting, verdict: Verdict, stamp: str) -> bool:
    """A verdict of "not met" that looked at nothing remote and ignored nothing, for a wait
    whose row says so already: the row `_remember` would write is `old`, and nothing is
    logged (the cheap test of the usual case before building that row)."""
    return (
        verdict.answer is None
        and not verdict.looked_remote
        and not verdict.ignored
        and old.answer is None
        and not old.consume
        and old.stamp == stamp
        and old.seen == (verdict.seen or wait.seen)
        and old.task_id == wait.state.task_id
    )


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
