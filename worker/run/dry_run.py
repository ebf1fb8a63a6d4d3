"""A dry run: what a run would decide, the mode and the agent's command line it would start,
and what stands in its way, with nothing claimed, written or moved."""

from __future__ import annotations

from typing import Any

from worker.config import Settings
from worker.delivery import delivery_lines
from worker.kernel.snapshot import preview
from worker.models import Outcome
from worker.modes import Mode, ModeSet
from worker.run.choice import pick_mode
from worker.sources.fallback import SETUP_PROBLEM
from worker.sources.project_checks import probe, where_words
from worker.state.run_report import RunOptions, RunReport


def dry_run(settings: Settings, options: RunOptions, modes: ModeSet) -> RunReport:
    """The run's report as `worker run --dry-run` shows it: the decision, and for a task its
    mode, the agent's command line and the notes on what would stop it or cost money."""
    snap, decision = preview(settings, options)
    report = RunReport(
        Outcome.DRY_RUN, reason_codes=list(decision.reason_codes), candidates=decision.candidates
    )
    report.notes = [
        f"maintenance is not taken: its checks cannot run: {skipped.detail}"
        for listing in snap.listings
        for skipped in listing.skipped
        if skipped.reason_code == SETUP_PROBLEM
    ]
    lines = delivery_lines(settings, options.use_worktree)
    report.notes += [f"delivery of {line}" for line in lines]
    # SOURCE_ERROR in words: which source could not be read, and why.
    report.source_errors = [e for listing in snap.listings for e in listing.errors][:10]
    if decision.task is None:
        return report
    mode_id, mode_reason = pick_mode(decision, options, modes)
    mode = modes.get(mode_id)
    from worker.agents.registry import adapter_for, permission_args
    from worker.results import AgentRequest
    from worker.run.iteration import budget_left, task_cost_cap
    from worker.sandbox.box import for_task

    request = AgentRequest(
        prompt="",
        model=options.model or mode.model,
        cwd=settings.workspace,
        timeout_s=mode.iteration_timeout_s or settings.iteration_timeout_s,
        extra_args=permission_args(mode),
        max_budget_usd=budget_left(mode, task_cost_cap(settings, mode), 0.0),
    )
    report.task_id, report.source = decision.task.id, decision.source
    report.modes, report.mode_reason = [mode_id], mode_reason
    boxed = for_task(settings, decision.task.source)  # GitHub's tasks get untrusted_mode
    report.command = adapter_for(boxed, mode).command(request)
    if decision.task.source == "fallback":
        report.reason, problem = _maintenance_preview(settings, decision.task.ref)
        report.notes += problem
    report.notes += _spend_notes(settings, mode)
    return report


def _maintenance_preview(settings: Settings, ref: dict[str, Any]) -> tuple[str, list[str]]:
    """What maintenance would run and where, and a set-up problem seen before it runs (the
    interpreter is asked whether it has the module it would run)."""
    where = ref.get("environment") or "the workspace"
    commands = list(ref.get("commands", []))
    reason = f"would run in {where}, {where_words(settings)}: " + "; ".join(commands)
    problem = ref.get("problem") or probe(commands, settings)
    if not problem:
        return reason, []
    return reason, [f"the checks cannot run: {problem}; no agent would start (a set-up problem)"]


def _spend_notes(settings: Settings, mode: Mode) -> list[str]:
    """The agent CLI that cannot start, and what else would call a model (the reviewers)."""
    from worker.agents.infra import preflight  # only with a task to show
    from worker.review.settings import reviewers_line  # the section is made at its first use

    notes = []
    failure = preflight(settings, mode)
    if failure is not None:
        notes.append(f"{failure.message}: the run would stop before taking the task")
    notes.append(reviewers_line(settings.review))
    return notes
