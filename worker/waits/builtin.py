"""The five built-in resume conditions: the specification's four, plus `time`; and their
registry, in the order phase 0 asks them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from worker.kernel.control import order_of_text
from worker.waits.conditions import (
    CheckContext,
    ResumeCondition,
    Verdict,
    Waiting,
    allowed_locally,
    aware,
    clip,
    decision_text,
)


class TimeCondition:
    """Resume at a moment: `resumeAt`, or `time:<ISO moment>` in `resumeWhen`. A usage
    limit is such a wait, until the reset plus a margin."""

    name = "time"

    def check(self, ctx: CheckContext, waits: Sequence[Waiting]) -> list[Verdict]:
        out = []
        for wait in waits:
            at = resume_moment(wait)
            if at is not None and at > ctx.now:
                out.append(Verdict())
                continue
            moment = (at or ctx.now).isoformat()
            if (wait.state.model_extra or {}).get("usageLimitHits"):
                answer = (
                    f"The agent usage limit has reset (waited until {moment}). Continue "
                    "the same iteration where you stopped."
                )
            elif (wait.state.model_extra or {}).get("apiUnavailableHits"):
                answer = (
                    f"The model API was unavailable; waited until {moment}. Continue the same "
                    "iteration where you stopped."
                )
                told = (wait.state.model_extra or {}).get("pendingAnswer")
                if told:  # the resume that met the outage: its answer was never read
                    answer += f"\n\nWhen the task resumed before that, it was told:\n{told}"
            else:
                answer = f"The time condition is met ({moment})."
            out.append(Verdict(answer))
        return out


def resume_moment(wait: Waiting) -> datetime | None:
    if wait.state.resume_at is not None:
        return aware(wait.state.resume_at)
    _, _, rest = wait.state.resume_when.partition(":")
    try:
        return aware(datetime.fromisoformat(rest.strip())) if rest.strip() else None
    except ValueError:
        return None


class IntercomMessage:
    """A local message for the task (`worker intercom send TASK TEXT`). A note starting with
    `/stop`, `/cancel`, `/pause` or `/resume` is a control order, not an answer: the kernel
    obeys it (`worker.kernel.intercom_orders`)."""

    name = "intercom_message"

    def check(self, ctx: CheckContext, waits: Sequence[Waiting]) -> list[Verdict]:
        out = []
        for wait in waits:
            notes = [
                (p, n)
                for p, n in ctx.lookups.notes(wait.path)
                if n.kind == "message" and order_of_text(n.text) is None
            ]
            if not notes:
                out.append(Verdict())
                continue
            text = "\n\n".join(
                f"Message from {n.by or 'the local user'} at {n.at().isoformat()}:\n{n.text}"
                for _, n in notes
            )
            out.append(Verdict(clip(text), [str(p) for p, _ in notes]))
        return out


class RooSyncResponse:
    """An inbox message replying to the task (`in_reply_to` or `thread_id`)."""

    name = "roosync_response"

    def check(self, ctx: CheckContext, waits: Sequence[Waiting]) -> list[Verdict]:
        out = []
        for wait in waits:
            replies = ctx.lookups.replies_to(wait.state)
            if not replies:
                out.append(Verdict())
                continue
            text = "\n\n".join(
                f"Reply from {m.sender} ({m.subject or m.id}):\n{m.body}" for _, m in replies
            )
            out.append(Verdict(clip(text), [str(p) for p, _ in replies]))
        return out


class UserApproval:
    """An approval (or a rejection) from an allowed approver after the wait began: the local
    intercom, an inbox reply starting `/approve` or `/reject`, or a GitHub comment."""

    name = "user_approval"

    def check(self, ctx: CheckContext, waits: Sequence[Waiting]) -> list[Verdict]:
        if ctx.lookups.quiet():  # no note, no reply: nothing local for any wait
            out = [Verdict() for _ in waits]
        else:
            out = [self._local(ctx, wait) for wait in waits]
        if ctx.github is None:  # no GitHub look this run: nothing remote to add
            return out
        from worker.waits.github_checks import github_approval  # only with a GitHub look

        pending = [i for i, verdict in enumerate(out) if verdict.answer is None]
        remote = [waits[i] for i in pending]
        for index, verdict in zip(pending, github_approval(ctx, remote), strict=True):
            verdict.ignored = out[index].ignored + verdict.ignored
            verdict.consume = out[index].consume + verdict.consume
            out[index] = verdict
        return out

    def _local(self, ctx: CheckContext, wait: Waiting) -> Verdict:
        verdict = Verdict()
        for path, note in ctx.lookups.notes(wait.path):
            if note.kind == "message":
                continue
            who = note.by or "the local user"
            if note.at() < wait.since:
                verdict.ignored.append(("APPROVAL_BEFORE_WAIT", f"{path.name} by {who}"))
                verdict.consume.append(str(path))
            elif not allowed_locally(wait.state, note.by, ctx.settings):
                verdict.ignored.append(("APPROVER_NOT_ALLOWED", f"{path.name} by {who}"))
                verdict.consume.append(str(path))
            elif verdict.answer is None:
                verdict.answer = decision_text(
                    note.kind == "approval", who, "the local intercom", note.text
                )
                verdict.consume.append(str(path))
        if verdict.answer is not None:
            return verdict
        listed = wait.state.approvers or ctx.settings.waits.approvers
        for path, message in ctx.lookups.replies_to(wait.state):
            word = (message.body.strip().split(maxsplit=1) or [""])[0].lower()
            if word not in ("/approve", "/reject"):
                continue
            if message.sender not in listed:
                verdict.ignored.append(
                    ("APPROVER_NOT_ALLOWED", f"inbox {message.id} from {message.sender}")
                )
                continue
            said = message.body.strip()[len(word) :].strip()
            verdict.answer = decision_text(word == "/approve", message.sender, "the inbox", said)
            verdict.consume.append(str(path))
            break
        return verdict


class GitHubDecision:
    """A change of the task's issue after the wait began: closed, reopened, a `decision:*`
    label, a linked pull request merged."""

    name = "github_decision"

    def check(self, ctx: CheckContext, waits: Sequence[Waiting]) -> list[Verdict]:
        from worker.waits.github_checks import github_decision  # GitHub's parts: only with a wait

        return github_decision(ctx, waits)


class PullRequest:
    """The pull request the task opened: failing checks, a trusted reviewer's requests or a
    conflict resume the task; merged or closed ends it (`worker.waits.github_pr`)."""

    name = "pull_request"

    def check(self, ctx: CheckContext, waits: Sequence[Waiting]) -> list[Verdict]:
        from worker.waits.github_pr import pull_request_verdicts  # only with such a wait

        return pull_request_verdicts(ctx, waits)


def registry() -> list[ResumeCondition]:
    """The built-in conditions in the order phase 0 asks them (cheap and local first)."""
    return [
        TimeCondition(),
        IntercomMessage(),
        RooSyncResponse(),
        UserApproval(),
        GitHubDecision(),
        PullRequest(),
    ]
