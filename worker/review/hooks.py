"""Where the batch cycle meets reviewers, directives and the knowledge store.

`task_sections` is called once per task, before its first iteration; `after_task` once per
task, after its report and before the next task. Neither lets a reviewer problem stop the
queue: failures are logged as warnings.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from worker.config import Settings
from worker.models import Outcome, Task, TaskResult
from worker.process.locking import held_in_turn
from worker.review import db
from worker.review import directives as queue
from worker.review.changes import task_changes
from worker.review.knowledge import KnowledgeStore
from worker.review.prompt import knowledge_section
from worker.review.run import RunReport, run_reviewer
from worker.review.triggers import (
    FINISHED,
    REVIEWERS,
    Counters,
    due_reviewers,
    signals_of,
    urgency_of,
)
from worker.state.store import Store

log = logging.getLogger(__name__)


@dataclass
class TaskSections:
    """What a task's prompts carry from the review: `sections` for the first prompt of a
    session, `changes` for a session that holds them from an earlier run (a wait): the
    directives new since, and those that left the queue."""

    sections: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)


def prompt_sections(settings: Settings, store: Store, task: Task) -> list[str]:
    """Markdown sections (`## PROJECT KNOWLEDGE`, `## ACTIVE DIRECTIVES`) for a task's prompt."""
    return task_sections(settings, store, task).sections


def task_sections(settings: Settings, store: Store, task: Task) -> TaskSections:
    """The sections chosen for `task` (knowledge and directives about it first, each within
    its budget), and what changed in the directives since the task was last shown them."""
    cfg = settings.review
    if not cfg.enabled:
        return TaskSections()
    db.ensure(store)
    sections: list[str] = []
    try:
        ks = KnowledgeStore.for_settings(settings)
        knowledge = knowledge_section(
            ks.docs(), task, cfg.token_budget, f"{cfg.knowledge_dir.as_posix()}/"
        )
        if knowledge.text:
            sections.append(knowledge.text)
            db.mark_shown(store, task.id, "doc", knowledge.included)
    except Exception as exc:  # knowledge is a help, never a blocker
        log.warning("could not read the knowledge store: %s", exc)
    active = queue.for_task(
        queue.pending(store),
        task,
        budget=cfg.directive_token_budget,
        limit=cfg.max_directives_in_prompt,
    )
    before = set(db.shown(store, task.id, "directive"))
    if active:
        sections.append(queue.render_section(active))
        db.mark_shown(store, task.id, "directive", [str(d.id) for d in active])
    return TaskSections(sections, _directive_changes(active, before))


def _directive_changes(active: list[queue.Directive], before: set[str]) -> list[str]:
    """For a session shown the directives `before`: the new ones, and those no longer asked."""
    new = [d for d in active if str(d.id) not in before]
    gone = sorted(before - {str(d.id) for d in active}, key=int)
    changes = []
    if new:
        changes.append(queue.render_section(new, "DIRECTIVES NEW SINCE YOU STARTED"))
    if gone:
        ids = ", ".join(f"D{ref}" for ref in gone)
        changes.append(f"## DIRECTIVES WITHDRAWN\n{ids}: no longer asked of this task.")
    return changes


def after_task(settings: Settings, store: Store, result: TaskResult) -> None:
    """Called between tasks, after a task's report: records what the task did with its
    directives and knowledge, ages directives, adds urgency and runs the reviewers due."""
    if not settings.review.enabled or result.outcome not in FINISHED:
        return
    try:
        # Slots (`max_parallel`) end tasks at once: one records its task and runs the
        # reviewers due at a time, so that two never run the same reviewers twice.
        with held_in_turn(settings.state / "review.lock"):
            process_task(settings, store, result)
    except Exception:
        log.warning(
            "reviewers: after task %s failed (the tasks go on)", result.task.id, exc_info=True
        )


def process_task(settings: Settings, store: Store, result: TaskResult) -> list[RunReport]:
    """The work of `after_task`, returning the reviewer runs (for tests and `--verbose`)."""
    cfg = settings.review
    db.ensure(store)
    task = result.task
    seq = int(db.add_counter(store, "task_seq", 1))
    changes = task_changes(settings.workspace, result.branch, cfg.diff_chars)
    db.log_task(
        store,
        seq,
        task.id,
        {
            "id": task.id,
            "title": task.title,
            "source": task.source,
            "outcome": result.outcome.value,
            "reason": result.reason[:500],
            "reason_codes": result.reason_codes,
            "modes": result.modes,
            "iterations": len(result.iterations),
            "anomalies": result.anomalies,
            "cost_usd": round(result.cost_usd, 4),
            "files": changes.files[:50],
            "lines_changed": changes.lines,
            "diff": changes.diff,
        },
    )
    success = result.outcome is Outcome.SUCCESS
    shown_directives = {int(ref) for ref in db.shown(store, task.id, "directive")}
    fates = queue.record_task_fates(
        store,
        task_id=task.id,
        text=f"{result.final_text}\n{result.reason}",
        shown=shown_directives,
        success=success,
        seq=seq,
    )
    for directive_id, fate in fates.items():
        log.info("directive D%s %s by %s", directive_id, fate, task.id)
    if success:
        _count_uses(settings, store, task.id)
    aged = queue.age_out(store, seq, cfg.directive_max_age)
    if aged:
        log.info("directives aged out: %s", ", ".join(f"D{i}" for i in aged))
    db.forget_shown(store, task.id)

    signals = signals_of(result, changes.lines, cfg)
    urgency = db.add_counter(store, "urgency", urgency_of(signals, cfg))
    counters = {}
    for name in REVIEWERS:
        state = db.reviewer_state(store, name)
        state.since += 1
        db.save_reviewer(store, state)
        counters[name] = Counters(
            state.since, state.effective_interval(cfg.reviewer(name).interval)
        )
    reports = []
    for due in due_reviewers(cfg, counters, signals.milestones, urgency):
        try:
            reports.append(run_reviewer(settings, store, due, seq))
        except Exception:
            log.warning("%s reviewer crashed (the tasks go on)", due.reviewer, exc_info=True)
            state = db.reviewer_state(store, due.reviewer)
            state.since = 0  # not again after every task
            db.save_reviewer(store, state)
    if urgency >= cfg.urgency.threshold:
        db.set_counter(store, "urgency", 0.0)  # spec: after running, urgency resets
    KnowledgeStore.for_settings(settings).write_index()
    return reports


def _count_uses(settings: Settings, store: Store, task_id: str) -> None:
    """A provisional doc shown to `establish_after` successful tasks becomes established."""
    ks = KnowledgeStore.for_settings(settings)
    for rel in db.shown(store, task_id, "doc"):
        uses = db.add_use(store, rel, task_id)
        doc = ks.doc(rel)
        if (
            doc is not None
            and doc.status == "provisional"
            and uses >= settings.review.establish_after
        ):
            ks.set_status(rel, "established")
            log.info("knowledge %s established after %s successful tasks", rel, uses)
