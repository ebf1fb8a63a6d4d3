"""One reviewer run: build its prompt, run it through an agent adapter, validate the answer,
apply it (docs, directives), judge convergence, and record the run and its cost.

Nothing here raises for a reviewer that cannot run or answers badly: the run is recorded as
`skipped`, `failed` or `invalid` with a warning, and the task queue goes on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from worker.agents.base import AgentAdapter
from worker.config import Settings
from worker.errors import MalformedInput, WorkerError
from worker.models import AgentRequest, AgentResult
from worker.review import db
from worker.review import directives as queue
from worker.review.knowledge import OWNERS, KnowledgeStore
from worker.review.reviewers import ReviewInput, build_prompt
from worker.review.schema import Answer, KnowledgeAnswer, findings_of, parse_answer
from worker.review.triggers import Due, next_interval
from worker.state.store import Store

log = logging.getLogger(__name__)
# Reviewers only read; worker writes their documents itself, from the JSON answer (folder
# ownership).
READ_ONLY_ARGS = ("--disallowedTools", "Edit", "Write", "NotebookEdit", "Bash")


@dataclass
class RunReport:
    reviewer: str
    trigger: str
    outcome: str  # ok | invalid | failed | skipped
    bootstrap: bool = False
    cost_usd: float = 0.0
    summary: str = ""
    directives: list[int] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    converging: bool = False
    interval: int = 0
    error: str | None = None
    run_id: int = 0


def _adapter(settings: Settings, name: str) -> tuple[AgentAdapter, str, tuple[str, ...]]:
    """The reviewer's adapter, model and extra arguments: its own mode, or Claude."""
    from worker.agents.registry import adapter_for, permission_args
    from worker.modes import Mode, load_modes, modes_path

    rcfg = settings.review.reviewer(name)
    if rcfg.mode is not None:
        mode = load_modes(modes_path(settings.workspace, settings.modes_file)).get(rcfg.mode)
    else:
        mode = Mode.model_validate(
            {"id": f"review-{name}", "model": rcfg.model, "maxIterations": 1}
        )
    extra = permission_args(mode)
    if mode.agent == "claude":
        extra = (*extra, *READ_ONLY_ARGS)
    return adapter_for(settings, mode), mode.model, extra


def _failure(result: AgentResult) -> str | None:
    if result.timed_out:
        return "timed out"
    if result.usage_limit_hit:
        return "usage limit reached"
    if result.exit_code is None and result.stderr_tail.startswith("cannot start"):
        return result.stderr_tail.strip()
    if result.is_error or result.exit_code not in (0, None):
        detail = (result.final_text or result.stderr_tail or result.subtype or "").strip()
        return f"agent error (exit {result.exit_code}): {detail[:300]}"
    return None


def _similar(a: str, b: str) -> bool:
    wa, wb = set(a.lower().split()), set(b.lower().split())
    return bool(wa and wb) and len(wa & wb) / len(wa | wb) >= 0.6


def count_new(findings: list[str], previous: list[str]) -> int:
    """Findings of this run that the previous run did not already have."""
    return sum(1 for item in findings if not any(_similar(item, old) for old in previous))


def run_reviewer(settings: Settings, store: Store, due: Due, seq: int) -> RunReport:
    name, cfg = due.reviewer, settings.review
    ks = KnowledgeStore.for_settings(settings)
    all_docs = ks.docs()
    own = [doc for doc in all_docs if doc.folder in OWNERS[name]]
    state = db.reviewer_state(store, name)
    report = RunReport(name, due.trigger, "ok", bootstrap=not any(doc.active for doc in own))
    tasks = db.recent_tasks(store, after_seq=state.last_seq or 0, limit=cfg.recent_tasks)
    previous = db.last_answered_run(store, name)
    inp = ReviewInput(
        reviewer=name,
        knowledge_dir=cfg.knowledge_dir.as_posix(),
        bootstrap=report.bootstrap,
        tasks=tasks,
        own_docs=own,
        other_docs=[d for d in all_docs if d not in own],
        pending=queue.pending(store),
        previous=previous,
    )
    answer = _ask(settings, inp, seq, report)
    if answer is not None:
        _apply(settings, store, ks, answer, report, seq, tasks[-1]["id"] if tasks else None)
        findings = findings_of(answer)
        new = count_new(findings, previous["findings"] if previous else [])
        report.converging = (
            not report.bootstrap
            and previous is not None
            and (answer.converging or new <= cfg.converging_max_new)
        )
        report.summary = answer.summary
    else:
        findings = []
        log.warning("%s reviewer %s: %s (the tasks go on)", name, report.outcome, report.error)
    _record(settings, store, state, report, seq, findings, answered=answer is not None)
    return report


def _ask(settings: Settings, inp: ReviewInput, seq: int, report: RunReport) -> Answer | None:
    """The reviewer's valid answer, or None with the report's outcome and error saying why."""
    name, cfg = inp.reviewer, settings.review
    try:
        adapter, model, extra = _adapter(settings, name)
        result = adapter.run(
            AgentRequest(
                prompt=build_prompt(inp),
                model=model,
                cwd=settings.workspace,
                timeout_s=cfg.timeout_s,
                log_path=settings.logs / "review" / f"{name}-{seq}.jsonl",
                extra_args=extra,
                max_budget_usd=cfg.reviewer(name).max_budget_usd,
            )
        )
    except (WorkerError, OSError, ValueError) as exc:
        report.outcome, report.error = "skipped", f"cannot run: {exc}"
        return None
    report.cost_usd = result.cost_usd
    failure = _failure(result)
    if failure:
        report.outcome, report.error = "failed", failure
        return None
    try:
        return parse_answer(name, result.final_text)
    except MalformedInput as exc:
        report.outcome, report.error = "invalid", str(exc)
        return None


def _record(
    settings: Settings,
    store: Store,
    state: db.ReviewerState,
    report: RunReport,
    seq: int,
    findings: list[str],
    *,
    answered: bool,
) -> None:
    """The run recorded, and the reviewer's next interval (longer while it converges)."""
    name, cfg = report.reviewer, settings.review
    rcfg = cfg.reviewer(name)
    current = state.effective_interval(rcfg.interval)
    report.interval = (
        next_interval(current, report.converging, rcfg.interval, cfg.max_interval)
        if answered
        else current
    )
    report.run_id = db.record_run(
        store,
        reviewer=name,
        task_seq=seq,
        trigger=report.trigger,
        outcome=report.outcome,
        bootstrap=int(report.bootstrap),
        converging=int(report.converging),
        interval=report.interval,
        cost_usd=report.cost_usd,
        summary=report.summary,
        findings=findings,
        error=report.error,
    )
    state.since, state.runs = 0, state.runs + 1
    state.interval, state.base = report.interval, rcfg.interval
    if answered:
        state.last_seq = seq  # a failed run leaves its tasks for the next one
    db.save_reviewer(store, state)
    if report.converging and report.interval != current:
        log.info("%s reviewer converging: interval %s -> %s", name, current, report.interval)


def _apply(
    settings: Settings,
    store: Store,
    ks: KnowledgeStore,
    answer: Answer,
    report: RunReport,
    seq: int,
    task_id: str | None,
) -> None:
    name, cfg = report.reviewer, settings.review
    if isinstance(answer, KnowledgeAnswer):
        written = ks.add_items(answer.knowledge_items, task_id)
    else:
        written = [w for doc in answer.documents if (w := ks.write_doc(name, doc, task_id))]
        for out in answer.directives:
            if report.bootstrap and out.type == "cleanup":
                log.info(
                    "%s reviewer: no cleanup directives while bootstrapping: %s",
                    name,
                    out.description,
                )
                continue
            new_id = queue.add(
                store,
                type=out.type,
                source=name,
                description=out.description,
                rationale=out.rationale,
                priority=out.priority,
                files=out.files,
                seq=seq,
                cleanup_cap=cfg.cleanup_cap,
            )
            if new_id is not None:
                report.directives.append(new_id)
    for item in written:
        db.reset_uses(store, item.path)  # new content earns its status again
        report.written.append(item.path)
