"""Control orders from GitHub: a comment whose first word is `/stop`, `/cancel`, `/pause` or
`/resume` (a reason may follow) on an issue this machine has a stake in.

Stakes: a GitHub task with an active claim in SQLite (taken by the source, or by a run
resuming its wait), or a wait state of the GitHub source. Only comments created after the
claim or the wait began count, and only from a trusted user: `[github] trusted_users`, or
write access to the repository. Like every order, `/resume` also follows `control.may_order`
(only a listed approver may resume), and with `[waits] approvers` listed only they may order.

Cost: one conditional request per issue (`GET .../comments?since=...` with the ETag of the
last answer), at most once per `[github] control_poll_s` per process; the stop watcher asks
every second and is answered from memory in between. An unchanged issue answers 304, which
costs no rate limit. A comment is obeyed once: the ids of consumed comments are kept in SQLite
(kv `github:control-done`). The hook never raises: a failure is a warning and no new orders.

`worker.kernel.orders.read_orders` asks this hook when `[github] repos` is set.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from worker.config import Settings
from worker.kernel import control
from worker.kernel.model import ControlOrder
from worker.sources.github.client import GitHubClient, make_client
from worker.sources.github.selection import parse_task_id, task_id
from worker.state.store import Store
from worker.waits import record
from worker.waits.github_look import iso, parse, whole
from worker.waits.state import WaitState, wait_state_files

log = logging.getLogger(__name__)

DONE_KEY = "github:control-done"
KEEP_DONE = 2000  # consumed ids kept; older comments predate any claim still held
ACCESS_TTL_S = 600.0  # a write-access answer is reused this long (a stranger costs 1 request)


@dataclass(frozen=True)
class Stake:
    """An issue this machine holds, and since when (the claim or the wait)."""

    repo: str
    number: int
    since: datetime

    @property
    def task_id(self) -> str:
        return task_id(self.repo, self.number)


@dataclass
class _Memory:
    """What this process remembers of one workspace between two looks at GitHub."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    looked_at: float | None = None  # time.monotonic() of the last look
    orders: list[ControlOrder] = field(default_factory=list)
    access: dict[tuple[str, str], tuple[bool, float]] = field(default_factory=dict)


_MEMORY: dict[Path, _Memory] = {}
_MEMORY_LOCK = threading.Lock()


class GitHubControl:
    """The `ControlHook` over GitHub comments; built by `orders.read_orders` on each read."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        with _MEMORY_LOCK:
            self.memory = _MEMORY.setdefault(settings.db_path, _Memory())

    def orders(self) -> list[ControlOrder]:
        gh = self.settings.github
        if not gh.repos:
            return []
        memory = self.memory
        with memory.lock:
            now = time.monotonic()
            if memory.looked_at is not None and now - memory.looked_at < gh.control_poll_s:
                return list(memory.orders)
            memory.looked_at = now  # a failed look waits for its turn too
            try:
                memory.orders = self._look()
            except Exception as exc:  # never take a run, or the stop watcher, down
                log.warning("github control: cannot read orders: %s", exc)
            return list(memory.orders)

    def consume(self, handle: Any, outcome: str) -> None:
        comment_id = int(handle)
        with self.memory.lock:
            self.memory.orders = [o for o in self.memory.orders if o.ref[1] != comment_id]
        try:
            with Store(self.settings.db_path) as store:
                remember_done(store, comment_id)
        except Exception as exc:  # settle() must finish: the order may then be seen again
            log.warning("github control: cannot record comment %s as done: %s", comment_id, exc)
            return
        log.info("github control: comment %s done (%s)", comment_id, outcome)

    def _look(self) -> list[ControlOrder]:
        with Store(self.settings.db_path) as store:
            held = stakes(self.settings, store)
            if not held:
                return []
            client = make_client(self.settings.github, store)
            if not client.authenticated:
                log.warning("github control: no token; set WORKER_GITHUB_TOKEN or GITHUB_TOKEN")
                return []
            if not client.polling_allowed():
                log.warning("github control: rate limit low (%s)", client.rate.describe())
                return []
            done = done_ids(store)
            orders = []
            for stake in held:
                try:
                    orders += self._issue_orders(client, stake, done)
                except Exception as exc:  # one issue's failure hides no other's orders
                    log.warning("github control: %s: %s", stake.task_id, exc)
            return orders

    def _issue_orders(
        self, client: GitHubClient, stake: Stake, done: set[int]
    ) -> list[ControlOrder]:
        since = whole(stake.since)
        items = client.paginate(
            f"/repos/{stake.repo}/issues/{stake.number}/comments",
            params={"since": iso(since)},
            cache_key=f"control:{stake.task_id}",
        )
        orders = []
        for item in items:
            if not isinstance(item.get("id"), int):
                continue
            found = control.order_of_text(str(item.get("body") or ""))
            if found is None or item["id"] in done:
                continue
            try:
                created = parse(str(item.get("created_at")))
            except ValueError:
                continue
            if created < since:
                continue  # before the claim or the wait: not about this run
            login = str((item.get("user") or {}).get("login") or "")
            order, text = found
            # Anyone with write access may edit a comment: an edited one is nobody's order.
            edited = str(item.get("updated_at") or "") > str(item.get("created_at"))
            trusted = (
                bool(login)
                and not edited
                and self._trusted(client, stake.repo, login)
                and control.may_order(order, login, self.settings.waits.approvers)
            )
            orders.append(
                ControlOrder(
                    f"github-{item['id']}",
                    order,
                    stake.task_id,
                    "github",
                    (f"@{login}: {text}" if text else f"@{login}")[:500],
                    login,
                    created.timestamp(),
                    trusted,
                    (self, item["id"]),
                )
            )
        return orders

    def _trusted(self, client: GitHubClient, repo: str, login: str) -> bool:
        """`[github] trusted_users`, or write access to the repository (kept a while)."""
        if login.lower() in {name.lower() for name in self.settings.github.trusted_users}:
            return True
        key, now = (repo, login), time.monotonic()
        cached = self.memory.access.get(key)
        if cached is not None and now - cached[1] < ACCESS_TTL_S:
            return cached[0]
        allowed = client.has_write_access(repo, login)
        self.memory.access[key] = (allowed, now)
        return allowed


def stakes(settings: Settings, store: Store) -> list[Stake]:
    """The issues of `[github] repos` this machine holds: active claims, GitHub wait states."""
    repos = set(settings.github.repos)
    found: dict[tuple[str, int], float] = {}

    def add(issue: tuple[str, int] | None, at: float) -> None:
        if issue is not None and issue[0] in repos:
            found[issue] = min(at, found.get(issue, at))

    rows = store.db.execute(
        "SELECT task_id, claimed_at FROM claims"
        " WHERE state = 'active' AND source IN ('github', 'wait')"
    )
    for row in rows:
        add(parse_task_id(str(row[0])), float(row[1]))
    # Only the waits worker recorded; phase 0 sets the other files aside with their reason.
    for _, state in record.trusted(settings, wait_state_files(settings.wait_states), store):
        if state.source == "github":
            add(_issue_of(state), state.since.timestamp())
    return [
        Stake(repo, number, datetime.fromtimestamp(at, UTC))
        for (repo, number), at in sorted(found.items())
    ]


def _issue_of(state: WaitState) -> tuple[str, int] | None:
    repo, number = state.source_ref.get("repo"), state.source_ref.get("number")
    if isinstance(repo, str) and isinstance(number, int | str) and str(number).isdigit():
        return repo, int(number)
    return parse_task_id(state.task_id)


def done_ids(store: Store) -> set[int]:
    return set(_ids(store.get(DONE_KEY)))


def remember_done(store: Store, comment_id: int) -> None:
    """Add a comment to the consumed ones (read-modify-write under the write lock)."""
    with store.transaction() as db:
        row = db.execute("SELECT value FROM kv WHERE key = ?", (DONE_KEY,)).fetchone()
        ids = _ids(row[0] if row else None)
        if comment_id not in ids:
            ids.append(comment_id)
        db.execute(
            "INSERT INTO kv(key, value, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value,"
            " updated_at = excluded.updated_at",
            (DONE_KEY, json.dumps(ids[-KEEP_DONE:]), time.time()),
        )


def _ids(raw: str | None) -> list[int]:
    try:
        value = json.loads(raw) if raw else []
    except ValueError:
        return []
    return [i for i in value if isinstance(i, int)] if isinstance(value, list) else []
