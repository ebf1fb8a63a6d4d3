"""When reviewers run: every N finished tasks, at milestones, or when urgency has built up.
Pure functions over a finished task's signals and the reviewers' counters."""

from __future__ import annotations

from dataclasses import dataclass

from worker.models import Outcome, TaskResult
from worker.review.settings import ReviewSettings

REVIEWERS = ("style", "design", "knowledge")
# Outcomes that finish a task with work done; idle, dry runs, waits and expiries do not count.
FINISHED = (Outcome.SUCCESS, Outcome.FAILURE, Outcome.CANCELLED)
_FAILED_STATUSES = ("failure",)


@dataclass(frozen=True)
class Signals:
    """What a finished task says about how the work is going."""

    verify_failures: int = 0
    aborted: bool = False
    escalated: bool = False
    churn: bool = False

    @property
    def milestones(self) -> tuple[str, ...]:
        return tuple(
            name for name, hit in (("abort", self.aborted), ("escalation", self.escalated)) if hit
        )


def signals_of(result: TaskResult, lines_changed: int, cfg: ReviewSettings) -> Signals:
    """A failed verification is an iteration that ended in failure or without a valid STATUS
    block; an abort is a failed task; churn is a large diff or many iterations."""
    failures = sum(
        1 for it in result.iterations if it.status in _FAILED_STATUSES or it.reason_code is not None
    )
    escalated = len(dict.fromkeys(result.modes)) > 1 or any(
        it.status == "escalate" for it in result.iterations
    )
    churn = lines_changed >= cfg.churn_lines or len(result.iterations) >= cfg.churn_iterations
    return Signals(failures, result.outcome is Outcome.FAILURE, escalated, churn)


def urgency_of(signals: Signals, cfg: ReviewSettings) -> float:
    weights = cfg.urgency
    score = signals.verify_failures * weights.verify_failed
    if signals.aborted:
        score += weights.abort
    if signals.churn:
        score += weights.churn
    return score


@dataclass
class Due:
    reviewer: str
    trigger: str  # count | milestone:<name> | urgency


@dataclass
class Counters:
    """A reviewer's count of tasks since its last run and its current (maybe doubled) interval."""

    since: int
    interval: int


def due_reviewers(
    cfg: ReviewSettings,
    counters: dict[str, Counters],
    milestones: tuple[str, ...],
    urgency: float,
) -> list[Due]:
    """The reviewers to run now, in a fixed order (style, design, knowledge)."""
    due = []
    for name in REVIEWERS:
        rcfg = cfg.reviewer(name)
        if not cfg.runs(name):
            continue
        count = counters[name]
        if count.interval > 0 and count.since >= count.interval:
            due.append(Due(name, "count"))
        elif rcfg.on_milestone and milestones:
            due.append(Due(name, f"milestone:{milestones[0]}"))
        elif urgency >= cfg.urgency.threshold:
            due.append(Due(name, "urgency"))
    return due


def next_interval(current: int, converging: bool, configured: int, cap: int) -> int:
    """Spec: a converging reviewer's interval doubles (natural decay); a run with real news
    goes back to the configured interval."""
    if not converging:
        return configured
    if current <= 0:
        return current
    return min(current * 2, max(cap, configured))
