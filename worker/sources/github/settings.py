"""Settings of the GitHub task source (section `[github]`).

The token is never a setting: it is read from `WORKER_GITHUB_TOKEN` or `GITHUB_TOKEN` where it
is used (worker/sources/github/client.py), so it cannot end up in a config dump.
"""

# Annotations evaluated as written, not postponed: worker/config.py says why.

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    field_validator,
)

_REPO = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"  # compiled at its first use: most have no repos


class GitHubSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    # `[]`, not `default_factory=list` (worker/config.py says why)
    repos: list[str] = []  # "owner/name"; empty = source off
    label: str = Field("roo-schedulable", min_length=1)  # the label that makes an issue a task
    # The `Agent:` field of the issue body must name one of these (case-insensitive).
    agent_identity: list[str] = Field(default_factory=lambda: ["Claude Code", "Both", "Any"])
    # Without an `Agent:` field an issue is taken (as `Any`) unless this is true.
    require_agent_field: bool = False
    base_url: str = "https://api.github.com"  # GitHub Enterprise: https://HOST/api/v3
    in_progress_label: str = "worker:in-progress"
    done_label: str = "worker:done"
    failed_label: str = "worker:failed"
    # A task cancelled (`/cancel`, `worker cancel`, `/reject` past the follow-up limit, its pull
    # request closed by a person): no failure of the agent's; not taken again either.
    cancelled_label: str = "worker:cancelled"
    waiting_label: str = "worker:waiting"
    # Logins trusted to start work even without write access to the repository.
    trusted_users: list[str] = []
    claim_ttl_s: PositiveInt = 4 * 3600  # a claim not renewed for this long has expired
    assign: bool = True  # assign the token's user when claiming (ignored where not allowed)
    # How a task is delivered (worker/delivery.py): a pull request from a worktree unless
    # configured otherwise; never in the operator's checkout by default.
    delivery: Literal["in_place", "branch", "pull_request"] | None = None
    open_pr: bool | None = None  # older spelling: true = "pull_request", false = "branch"
    push: bool = True  # push the task branch on success (delivery "branch" or "pull_request")
    # `Name <email>` of worker's commits; None: the token's user with GitHub's noreply address
    # (worker/sources/github/authorship.py).
    commit_author: str | None = None
    pr_base: str | None = None  # None = the repository's default branch
    remote: str = "origin"
    # A pull request the task opened keeps the task alive: it resumes when the checks fail, a
    # trusted reviewer asks for changes, or the base moved into a conflict; it ends when the
    # pull request is merged (success) or closed (cancelled).
    follow_pull_requests: bool = True
    max_follow_ups: int = Field(3, ge=0, le=50)  # rounds of fixes, then a person decides
    # On the pull request, put there by a trusted person: merge once every required check
    # passed and a trusted approval stands on the current head.
    merge_label: str = Field("worker:merge", min_length=1)
    merge_method: Literal["merge", "squash", "rebase"] = "squash"
    # API behaviour
    request_timeout_s: int = Field(15, ge=1)  # seconds (an int for PyGithub); its default
    retries: int = Field(3, ge=0, le=10)
    backoff_s: NonNegativeFloat = 1.0  # first retry delay; doubles, capped at 30 s
    max_retry_after_s: NonNegativeFloat = 120.0  # a longer Retry-After is an error, not a wait
    rate_limit_floor: NonNegativeInt = 100  # below this many requests left, stop polling
    # PyGithub's politeness delays (secondary rate limits); 0 in tests.
    seconds_between_requests: NonNegativeFloat = 0.25
    seconds_between_writes: NonNegativeFloat = 1.0
    max_issues: int = Field(100, gt=0, le=1000)  # issues read per repository and run
    # Control comments (`/stop`, `/cancel`, `/pause`, `/resume`) on the issues this machine
    # holds are read at most this often per process (the stop watcher asks every second).
    control_poll_s: NonNegativeFloat = 60.0

    @field_validator("repos")
    @classmethod
    def _repo_names(cls, value: list[str]) -> list[str]:
        for repo in value:
            if not re.match(_REPO, repo):
                raise ValueError(f"{repo!r} is not of the form owner/name")
        return value

    @field_validator("commit_author")
    @classmethod
    def _author(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^\s*[^<>\n]+?\s*<[^<>\s]+@[^<>\s]+>\s*$", value):
            raise ValueError("must read `Name <address>`, e.g. `Ada Bot <ada@example.com>`")
        return value

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError("must start with https:// (or http:// for a local server)")
        return value.rstrip("/")

    @property
    def effective_delivery(self) -> Literal["in_place", "branch", "pull_request"]:
        if self.delivery is not None:
            return self.delivery
        if self.open_pr is not None:
            return "pull_request" if self.open_pr else "branch"
        return "pull_request"

    def follow_limit(self, ref: Mapping[str, Any]) -> int:
        """The rounds of fixes a task's pull request may have: `max_follow_ups`, or more once
        a person approved going on past it (`prLimit` in the task's reference)."""
        given = ref.get("prLimit")
        return int(str(given)) if str(given).isdigit() else self.max_follow_ups

    @property
    def end_labels(self) -> tuple[str, str, str, str]:
        return (self.done_label, self.failed_label, self.cancelled_label, self.waiting_label)


def next_round(ref: Mapping[str, Any]) -> int:
    """The round of fixes a task whose reference is `ref` has just made on its pull request:
    0 when it opened it, then 1, 2, ..."""
    return int(ref["prRounds"]) + 1 if "prRounds" in ref else 0


def held_reason(number: int, rounds: int, more: int) -> str:
    """What a pull request at its follow-up limit waits for, in words for the issue."""
    return (
        f"pull request #{number} has had {rounds} round(s) of fixes, its limit ([github] "
        f"max_follow_ups = {more}): a person decides. Comment `/approve` on the issue or the "
        f"pull request for {more} more round(s) (text after it goes to the agent), or `/reject` "
        "to stop following it (no agent starts; the pull request stays open for you). The merge "
        "label still merges it once its checks pass and it is approved."
    )
