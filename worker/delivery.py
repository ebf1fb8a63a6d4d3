"""How each task source's work is delivered: in place, on a branch in a worktree, or as a pull
request from a worktree. A setting per source in `worker.toml` (`[github] delivery`, the
top-level `inbox_delivery`), with a default that fits the source: an issue tracker's task
becomes a pull request and never edits the operator's checkout; a message in the inbox is
worked on in place.

`worker run --use-worktree` still moves in-place work to a worktree, for one run.
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from worker.config import Settings

Delivery = Literal["in_place", "branch", "pull_request"]
IN_PLACE: Delivery = "in_place"
BRANCH: Delivery = "branch"
PULL_REQUEST: Delivery = "pull_request"

WORDS = {
    IN_PLACE: "in place, in the workspace's checkout",
    BRANCH: "on a branch worker/<task> in a worktree (GitHub's: pushed, no pull request)",
    PULL_REQUEST: "as a pull request from a worktree (branch worker/<task>)",
}


def delivery_of(settings: "Settings", source: str, use_worktree: bool = False) -> Delivery:
    """The delivery of `source`'s tasks; `use_worktree` (the flag) turns in place into a branch.
    Maintenance and unknown sources work in place unless the flag says otherwise."""
    found: Delivery = IN_PLACE
    if source == "github":
        found = settings.github.effective_delivery
    elif source == "inbox":
        found = settings.inbox_delivery
    if use_worktree and found == IN_PLACE:
        return BRANCH
    return found


def in_worktree(delivery: Delivery) -> bool:
    return delivery != IN_PLACE


def task_in_worktree(
    settings: "Settings", source: str, ref: Mapping[str, Any], use_worktree: bool = False
) -> bool:
    """Whether a task works in a worktree of its own: its source's delivery says so, or it
    follows its pull request (whose branch it works on again). Else it edits the checkout."""
    return in_worktree(delivery_of(settings, source, use_worktree)) or "pr" in ref


def deliveries(settings: "Settings", use_worktree: bool = False) -> dict[str, Delivery]:
    """The delivery of each source this workspace takes tasks from, in priority order."""
    names = ["inbox", *(["github"] if settings.github.repos else [])]
    return {name: delivery_of(settings, name, use_worktree) for name in names}


def delivery_lines(settings: "Settings", use_worktree: bool = False) -> list[str]:
    """`github: as a pull request from a worktree ...`, one line per source."""
    return [f"{name}: {WORDS[found]}" for name, found in deliveries(settings, use_worktree).items()]
