"""A pull request past its follow-up limit (`[github] max_follow_ups`): worker still follows
it (a merge, a close or the merge label end it as before), and resumes nothing until a person
answers on the issue: `/approve` grants `max_follow_ups` more rounds of fixes (the agent starts
only when the pull request needs work), `/reject` ends the task without starting the agent,
the pull request left open for people."""

from __future__ import annotations

from typing import TYPE_CHECKING

from worker.waits.conditions import HELD, Verdict
from worker.waits.github_checks import first_answer
from worker.waits.record import save_wait

if TYPE_CHECKING:
    from worker.waits.github_pr import Pull


def held(pull: Pull) -> bool:
    return bool(pull.wait.state.source_ref.get("prHeld"))


def answer_past_limit(pull: Pull, verdict: Verdict) -> tuple[bool, str, str] | None:
    """A trusted person's `/approve` or `/reject` on the task's issue since the wait began:
    (approved, who, their note); None while nobody answered."""
    number = pull.wait.state.source_ref.get("number")
    if not str(number).isdigit():
        return None
    return first_answer(pull.ctx, pull.look, pull.wait, pull.repo, int(str(number)), verdict)


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
    return f"{HELD}: a person answers /approve or /reject on the issue"
