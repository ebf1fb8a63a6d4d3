"""The directives queue: what reviewers ask the next tasks to address, and each one's fate.

Fates: `addressed`, `explained` (already handled) and `escalated` (by a task, named in its
final answer), `aged_out` (not picked up in `directive_max_age` tasks), `dropped` (by the user,
or as the oldest cleanup directive over the cap). Only `pending` directives reach prompts.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from worker.models import Task
from worker.review import db
from worker.review.prompt import estimate_tokens, words
from worker.state.store import Store

log = logging.getLogger(__name__)

PRIORITY_RANK = {"critical": 0, "normal": 1, "low": 2}
TASK_FATES = ("addressed", "explained", "escalated")
FATES = (*TASK_FATES, "aged_out", "dropped")
# The line a task writes for each directive it dealt with: "DIRECTIVE D12: addressed - ...".
_FATE_LINE = re.compile(
    r"(?im)^[ \t>*`-]*DIRECTIVE[ \t]+D(?P<id>\d+)[ \t*`]*:[ \t*`]*"
    r"(?P<fate>addressed|explained|escalated)\b"
)


@dataclass
class Directive:
    id: int
    type: str  # functional | cleanup
    source: str  # the reviewer that wrote it
    description: str
    rationale: str
    priority: str  # critical | normal | low
    files: list[str] = field(default_factory=list)
    state: str = "pending"
    created_seq: int = 0
    created_at: float = 0.0
    fate_task: str | None = None
    fate_note: str | None = None
    fate_seq: int | None = None

    @property
    def group(self) -> int:
        """0: before the task's own work; 1: before planned work; 2: after it (cleanup)."""
        if self.priority == "critical":
            return 0
        return 1 if self.type == "functional" else 2

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": f"D{self.id}",
            "type": self.type,
            "source": self.source,
            "priority": self.priority,
            "description": self.description,
            "rationale": self.rationale,
            "files": self.files,
            "state": self.state,
            "created_seq": self.created_seq,
            "fate_task": self.fate_task,
            "fate_note": self.fate_note,
        }


def _row(row: Any) -> Directive:
    return Directive(
        id=row["id"],
        type=row["type"],
        source=row["source"],
        description=row["description"],
        rationale=row["rationale"],
        priority=row["priority"],
        files=json.loads(row["files"]),
        state=row["state"],
        created_seq=row["created_seq"],
        created_at=row["created_at"],
        fate_task=row["fate_task"],
        fate_note=row["fate_note"],
        fate_seq=row["fate_seq"],
    )


def ordered(directives: list[Directive]) -> list[Directive]:
    """Critical first, then functional, then cleanup; by priority, then oldest first."""
    return sorted(directives, key=lambda d: (d.group, PRIORITY_RANK[d.priority], d.id))


def pending(store: Store) -> list[Directive]:
    rows = store.db.execute("SELECT * FROM directives WHERE state = 'pending'")
    return ordered([_row(row) for row in rows])


def all_directives(store: Store, limit: int = 200) -> list[Directive]:
    rows = store.db.execute("SELECT * FROM directives ORDER BY id DESC LIMIT ?", (limit,))
    return [_row(row) for row in rows]


def get(store: Store, directive_id: int) -> Directive | None:
    row = store.db.execute("SELECT * FROM directives WHERE id = ?", (directive_id,)).fetchone()
    return _row(row) if row else None


def _same(a: str, b: str) -> bool:
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


def add(
    store: Store,
    *,
    type: str,
    source: str,
    description: str,
    rationale: str = "",
    priority: str = "normal",
    files: list[str] | None = None,
    seq: int,
    cleanup_cap: int,
    run_id: int | None = None,
) -> int | None:
    """Queue a directive; None when the same one is already pending. Past the cleanup cap
    the oldest pending cleanup directive is dropped (spec: hard cap, the oldest goes)."""
    with store.transaction() as conn:
        for row in conn.execute("SELECT description FROM directives WHERE state = 'pending'"):
            if _same(row[0], description):
                return None
        cur = conn.execute(
            "INSERT INTO directives(created_at, created_seq, type, source, description,"
            " rationale, priority, files, run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                time.time(),
                seq,
                type,
                source,
                description,
                rationale,
                priority,
                json.dumps(files or []),
                run_id,
            ),
        )
        new_id = int(cur.lastrowid or 0)
        if type == "cleanup":
            ids = [
                row[0]
                for row in conn.execute(
                    "SELECT id FROM directives WHERE state = 'pending' AND type = 'cleanup'"
                    " ORDER BY id"
                )
            ]
            for old in ids[: max(0, len(ids) - cleanup_cap)]:
                _set_fate(conn, old, "dropped", seq, None, f"cleanup cap ({cleanup_cap}) reached")
                log.info("directive D%s dropped: cleanup cap %s", old, cleanup_cap)
        return new_id


def _set_fate(
    conn: Any, directive_id: int, fate: str, seq: int | None, task_id: str | None, note: str
) -> bool:
    cur = conn.execute(
        "UPDATE directives SET state = ?, fate_at = ?, fate_seq = ?, fate_task = ?, fate_note = ?"
        " WHERE id = ? AND state = 'pending'",
        (fate, time.time(), seq, task_id, note, directive_id),
    )
    return bool(cur.rowcount)


def drop(store: Store, directive_id: int, note: str = "dropped by the user") -> bool:
    """Drop a pending directive; False if there is no such pending directive."""
    with store.transaction() as conn:
        return _set_fate(conn, directive_id, "dropped", db.task_seq(store), None, note)


def age_out(store: Store, seq: int, max_age: int) -> list[int]:
    """Pending directives not picked up in `max_age` finished tasks age out."""
    with store.transaction() as conn:
        ids = [
            row[0]
            for row in conn.execute(
                "SELECT id FROM directives WHERE state = 'pending' AND ? - created_seq >= ?",
                (seq, max_age),
            )
        ]
        for directive_id in ids:
            _set_fate(
                conn, directive_id, "aged_out", seq, None, f"not picked up in {max_age} tasks"
            )
    return ids


def fates_in(text: str) -> dict[int, str]:
    """`DIRECTIVE D<id>: addressed|explained|escalated` lines of a task's final answer."""
    found: dict[int, str] = {}
    for match in _FATE_LINE.finditer(text or ""):
        found[int(match.group("id"))] = match.group("fate").lower()
    return found


def record_task_fates(
    store: Store, *, task_id: str, text: str, shown: set[int], success: bool, seq: int
) -> dict[int, str]:
    """Record what a task says it did with the directives it was shown. A failed task can
    escalate a directive but not address it."""
    done: dict[int, str] = {}
    with store.transaction() as conn:
        for directive_id, fate in fates_in(text).items():
            if directive_id not in shown or (fate != "escalated" and not success):
                continue
            if _set_fate(conn, directive_id, fate, seq, task_id, f"{fate} by task {task_id}"):
                done[directive_id] = fate
    return done


INSTRUCTIONS = """\
Reviewers of this project left these directives. Each one MUST be dealt with: address it (do
the work), explain why it is already handled, or escalate it (it needs a person). Critical
directives come before the task's own work; functional ones before any further planned work;
cleanup only after the task's own work is done. Leave out a directive you did not get to: it
stays in the queue. For each directive you dealt with, put one line in your final answer:
`DIRECTIVE D<id>: addressed|explained|escalated - <one sentence>`."""

_GROUP_TITLES = (
    "Critical: before the task's own work",
    "Functional: before further planned work",
    "Cleanup: after the task's own work",
)


def relevance(directive: Directive, task_text: str) -> int:
    """How much a directive is about the task: the words they share, and more for each of
    its files the task names."""
    about = f"{directive.description} {directive.rationale} {' '.join(directive.files)}"
    named = sum(1 for path in directive.files if path and path.lower() in task_text.lower())
    return len(words(about) & words(task_text)) + 3 * named


def for_task(pending: list[Directive], task: Task, *, budget: int, limit: int) -> list[Directive]:
    """The directives a task's prompt shows: the critical ones, then those about the task (its
    words, its files), then the rest in queue order; at most `limit` of them, in about
    `budget` tokens (the critical ones whatever it takes). One left out stays queued."""
    task_text = f"{task.title} {task.body} {' '.join(task.labels)}"

    def rank(d: Directive) -> tuple[bool, int, int, int, int]:
        about = relevance(d, task_text)
        return (d.priority != "critical", -about, d.group, PRIORITY_RANK[d.priority], d.id)

    ranked = sorted(pending, key=rank)
    chosen: list[Directive] = []
    used = estimate_tokens(_head())
    for directive in ranked:
        if len(chosen) >= limit:
            break
        cost = estimate_tokens(_line(directive)) + 1
        if directive.priority != "critical" and used + cost > budget:
            continue
        chosen.append(directive)
        used += cost
    return ordered(chosen)


def render_section(directives: list[Directive], title: str = "ACTIVE DIRECTIVES") -> str:
    """The `## ACTIVE DIRECTIVES` section, in priority order ('' when there are none)."""
    if not directives:
        return ""
    parts = [_head(title)]
    for group, group_title in enumerate(_GROUP_TITLES):
        members = [d for d in ordered(directives) if d.group == group]
        if not members:
            continue
        parts += ["", f"### {group_title}"]
        parts += [_line(d) for d in members]
    return "\n".join(parts)


def _head(title: str = "ACTIVE DIRECTIVES") -> str:
    return f"## {title}\n\n{INSTRUCTIONS}"


def _line(d: Directive) -> str:
    line = f"- D{d.id} [{d.priority} {d.type}, from the {d.source} reviewer] {d.description}"
    if d.rationale:
        line += f"\n  Why: {d.rationale}"
    if d.files:
        line += f"\n  Files: {', '.join(d.files)}"
    return line
