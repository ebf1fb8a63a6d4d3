"""`worker doctor`'s checks of how the work is done: how each source's work is delivered (and
whether it can be here), what the daily maintenance runs, and the caps on spend.
"""

from __future__ import annotations

from collections.abc import Iterable

from worker.config import Settings
from worker.delivery import IN_PLACE, deliveries, delivery_lines
from worker.operator.doctor_findings import Context, Finding, Status
from worker.process.workspace_git import delivery_problem
from worker.review.settings import reviewers_line
from worker.sources.fallback import load_problem, policy
from worker.sources.project_checks import detect_plan, probe, where_words


def check_delivery(context: Context) -> Iterable[Finding]:
    """How each source's work is delivered, and whether it can be here (a worktree needs a
    git repository)."""
    settings = context.settings
    for source, line in zip(deliveries(settings), delivery_lines(settings), strict=True):
        problem = delivery_problem(settings, source, use_worktree=False)
        if problem is not None:
            yield Finding("delivery", Status.FAIL, problem)
        else:
            yield Finding("delivery", Status.OK, line)
    if settings.max_parallel > 1:
        yield from _alone(settings)


def _alone(settings: Settings) -> Iterable[Finding]:
    """Slots and in-place work: such a task waits for every other slot and runs alone."""
    setting = {"inbox": "inbox_delivery", "github": "[github] delivery"}
    for source, found in deliveries(settings).items():
        if found == IN_PLACE:
            yield Finding(
                "delivery",
                Status.WARN,
                f"max_parallel = {settings.max_parallel}, but {source}'s tasks are delivered in "
                "place: each waits for the other slots to end and runs alone. Set "
                f'{setting[source]} = "branch" to run them beside others (or `worker serve '
                "--use-worktree`)",
            )


def check_maintenance(context: Context) -> Iterable[Finding]:
    """How the daily maintenance runs the project's checks, and a set-up problem it met."""
    settings = context.settings
    plan = detect_plan(settings) if settings.fallback.enabled is not False else None
    said = policy(settings, plan)
    if not said.on or plan is None:
        yield Finding("maintenance", Status.OK, said.why)  # said once, not as a problem
        return
    if not plan.commands:
        yield Finding(
            "maintenance",
            Status.WARN,
            "no build or test command detected: set [fallback] test, or maintenance does nothing",
        )
        return
    commands = "; ".join(plan.commands)
    where = where_words(settings)
    yield Finding("maintenance", Status.OK, f"runs `{commands}` in {plan.environment}, {where}")
    problem = plan.problem or probe(plan.commands, settings)
    if problem:
        yield Finding(
            "maintenance",
            Status.WARN,
            f"its checks cannot run: {problem}; fix it or set [fallback] test (no agent "
            "is started for a set-up problem)",
        )
    known = load_problem(settings, None)
    if known is not None and known.problem != problem:
        yield Finding(
            "maintenance",
            Status.WARN,
            f"its last run could not run the checks: {known.problem}; no agent was started, "
            "and it tries again when the project or worker.toml changes, or after "
            f"{settings.fallback.interval_hours:g} h",
        )


def check_spend(context: Context) -> Iterable[Finding]:
    """What calls a model besides each task's own agent, and the caps on spend."""
    settings = context.settings
    yield Finding("spend", Status.OK, reviewers_line(settings.review))
    cap = settings.daily_cost_cap_usd
    words = f"${cap:.2f} a day" if cap else "no daily cap (daily_cost_cap_usd)"
    yield Finding(
        "spend", Status.OK, f"each task: at most ${settings.task_cost_cap_usd:.2f}; {words}"
    )
