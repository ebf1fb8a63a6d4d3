"""Resume conditions: one small protocol and what the conditions share; the built-in ones sit
in an ordered registry in `worker.waits.builtin`.

A condition looks at all the waits of its kind at once (one batched look per source per run)
and returns one `Verdict` per wait: the answer the agent waited for when the condition is met,
what to consume once the resumed run has ended, and what it ignored and why.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from worker.config import Settings
from worker.waits.state import WaitState

if TYPE_CHECKING:
    from worker.waits.github_look import GitHubLook
    from worker.waits.lookups import Lookups

ANSWER_CAP = 4000  # characters of untrusted text handed to the agent (quoted as data)
# Where a pull request stands (`worker.waits.github_pr`); while its checks run or failed, or
# the merge label waits on them, it is looked at every run, not every `recheck_interval_s`: its
# looks are conditional requests, and an unchanged pull request costs no rate limit.
# One past its follow-up limit waits for a person: looked at every `recheck_interval_s`.
RUNNING, FAILED, BLOCKED = "checks running", "checks failed", "merge label set, but"
HELD = "follow-up limit reached"


def watched(seen: str | None) -> bool:
    """Whether a pull request that stood as `seen` at its last look is looked at every run."""
    if seen is None or HELD in seen:
        return False
    return any(word in seen for word in (RUNNING, FAILED, BLOCKED))


@dataclass
class Waiting:
    """One wait-state file as phase 0 sees it."""

    path: Path
    state: WaitState
    kind: str  # the condition's name after defaulting (see `condition_of`)
    due: bool = True  # a remote look at this wait is allowed this run (recheck interval)
    seen: str | None = None  # the issue's `updated_at` at the last remote look
    checked_at: float = 0.0  # epoch seconds of the last remote look (0: never)
    key: str = field(init=False)  # the file's name: what the ledger keeps the wait by

    def __post_init__(self) -> None:
        self.key = self.path.name  # taken once: every condition and the ledger ask for it

    @property
    def since(self) -> datetime:
        return aware(self.state.timestamp)


@dataclass
class Verdict:
    answer: str | None = None  # None: not met
    consume: list[str] = field(default_factory=list)  # files to move to done/ after the resume
    ignored: list[tuple[str, str]] = field(default_factory=list)  # (reason code, detail)
    looked_remote: bool = False  # a remote source was asked (the recheck clock restarts)
    seen: str | None = None  # the issue's `updated_at` the remote look saw
    # The wait ends without resuming the agent: (outcome, reason), e.g. its pull request merged.
    end: tuple[str, str] | None = None


@dataclass
class CheckContext:
    settings: Settings
    now: datetime
    lookups: Lookups
    github: GitHubLook | None = None


class ResumeCondition(Protocol):
    name: str  # the `resumeWhen` value it answers

    def check(self, ctx: CheckContext, waits: Sequence[Waiting]) -> list[Verdict]:
        """One verdict per wait, in order; batched: at most one look per source."""
        ...


def aware(at: datetime) -> datetime:
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def allowed_locally(state: WaitState, by: str | None, settings: Settings) -> bool:
    """The local user is trusted; a named approver must be on the wait's (or the
    configuration's) allow-list when there is one."""
    if by is None:
        return True
    listed = state.approvers or settings.waits.approvers
    return not listed or by in listed


def trust_of(state: WaitState, settings: Settings) -> str:
    """The allow-lists that decide who may answer this wait, as one text."""
    lists = [state.approvers, settings.waits.approvers, settings.github.trusted_users]
    return json.dumps([sorted(names or []) for names in lists])


def clip(text: str) -> str:
    return text if len(text) <= ANSWER_CAP else text[:ANSWER_CAP] + "\n[... cut]"


def decision_text(approved: bool, who: str, where: str, note: str) -> str:
    """The answer an approval or a rejection hands the agent, wherever it was given."""
    if approved:
        text = f"Approved by {who} (via {where})."
    else:
        text = (
            f"Rejected by {who} (via {where}). Do not carry out what you asked approval "
            "for; wrap up and report."
        )
    return clip(f"{text}\nNote: {note}" if note.strip() else text)
