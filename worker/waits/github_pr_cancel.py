"""A `worker cancel` of a task that follows its pull request: the pull request is read first,
and one a person merged (or closed) already ends the task as that, not as cancelled."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

from worker.config import Settings
from worker.state.store import Store
from worker.waits.conditions import CheckContext, Verdict, Waiting
from worker.waits.github_look import ClientLook
from worker.waits.github_pr import Pull, ended_of
from worker.waits.state import WaitState

log = logging.getLogger(__name__)


def ended_already(settings: Settings, store: Store, path: Path, state: WaitState) -> Verdict:
    """The followed pull request read now (a `cancel` of its task): its end when it was merged
    or closed already, else nothing; an unreadable one is nothing too (the cancel goes on)."""
    from worker.sources.github.client import make_client
    from worker.waits.lookups import Lookups

    ref = state.source_ref
    if not str(ref.get("pr")).isdigit():
        return Verdict()
    number = int(str(ref["pr"]))
    try:
        ctx = CheckContext(settings, datetime.now(UTC), Lookups(settings, store=store))
        look = ClientLook(make_client(settings.github, store))
        wait = Waiting(path, state, "pull_request")
        pull = Pull(ctx, look, look.client, wait, str(ref["repo"]), number)
        pull.data = pull.get(f"pulls/{number}", f"pull#{number}")
        return ended_of(pull) or Verdict()
    except Exception as exc:  # GitHub down: the cancel is what the person asked
        log.warning("cannot read pull request #%s before the cancel: %s", number, exc)
        return Verdict()
