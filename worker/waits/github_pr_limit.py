"""A pull request past its follow-up limit (`[github] max_follow_ups`): worker still follows
it (a merge, a close or the merge label end it as before), and resumes nothing until a person
answers on the issue or on the pull request (its conversation, where a maintainer reviewing it
is): `/approve` grants `max_follow_ups` more rounds of fixes (the agent starts
only when the pull request needs work), `/reject` ends the task without starting the agent,
the pull request left open for people."""

from __future__ import annotations

from typing import TYPE_CHECKING

from worker.waits.conditions import HELD, Verdict
from worker.waits.github_checks import Answer, first_answer
from worker.waits.record import save_wait

if TYPE_CHECKING:
    from worker.waits.github_pr import Pull


def held(pull: Pull) -> bool:
    return bool(pull.wait.state.source_ref.get("prHeld"))


def answer_past_limit(pull: Pull, verdict: Verdict) -> Answer | None:
    """A trusted person's first `/approve` or `/reject` since the wait began, on the task's
    issue or on the pull request; None while nobody answered."""
    number = pull.wait.state.source_ref.get("number")
    places = [int(str(number))] if str(number).isdigit() else []
    answers = [
        found
        for place in [*places, pull.number]
        if (found := first_answer(pull.ctx, pull.look, pull.wait, pull.repo, place, verdict))
    ]
    return min(answers, key=lambda answer: answer.at, default=None)


def rejected(pull: Pull, who: str) -> Verdict:
    return Verdict(
        end=(
            "cancelled",
            f"{who} answered /reject past the follow-up limit: worker no longer follows pull "
            f"request #{pull.number}, which stays open for people; no agent was started",
        )
    )


def grant_rounds(pull: Pull, who: str) -> str:
    """`/approve`: the wait follows its pull request again, with `max_follow_ups` more rounds
    (its file rewritten in place, its moment kept: the answer is not read twice as new)."""
    settings = pull.ctx.settings
    more = settings.github.max_follow_ups
    state = pull.wait.state
    ref = state.source_ref
    ref["prHeld"] = False
    ref["prLimit"] = int(str(ref.get("prRounds") or 0)) + more
    state.reason = f"pull request #{pull.number} is open; {who} approved {more} more round(s)"
    save_wait(settings, state, name=pull.wait.path.name)
    return f"{who} approved {more} more round(s) of fixes past the follow-up limit"


def held_standing() -> str:
    return f"{HELD}: a person answers /approve or /reject on the issue or the pull request"
