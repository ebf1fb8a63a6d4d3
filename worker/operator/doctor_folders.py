"""`worker doctor`'s checks of where worker keeps things: the state folder is writable and out of
the agent's reach, the database is whole, the inbox is readable.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable

from worker.operator import integrity
from worker.operator.doctor_findings import Context, Finding, Status
from worker.state import statedir


def check_state(context: Context) -> Iterable[Finding]:
    state = context.settings.state
    try:
        state.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=state, prefix=".doctor-", delete=True) as probe:
            probe.write(b"ok")
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        yield Finding(
            "state",
            Status.FAIL,
            f"the state folder {state} is not writable ({exc.strerror}): fix its permissions "
            "or set state_dir",
        )
        return
    yield Finding("state", Status.OK, f"the state folder {state} is writable")


def check_reach(context: Context) -> Iterable[Finding]:
    """worker's own folders inside the working tree can be written by the agent."""
    settings = context.settings
    for key in statedir.exposed(settings):
        folder = settings.state if key == "state_dir" else settings.inbox
        yield Finding(
            "reach",
            Status.WARN,
            f"{key} ({folder}) lies inside the working tree, where the agent can write: move it "
            "out (the default is outside), see the README's Security section",
        )
    old = statedir.legacy_dir(settings.workspace, settings.state)
    if old is not None:
        yield Finding(
            "reach",
            Status.WARN,
            f"an old state folder {old} is still in the working tree: the next run moves it",
        )
    old_waits = statedir.legacy_wait_states(settings)
    if old_waits is not None:
        yield Finding(
            "reach",
            Status.WARN,
            f"wait states in {old_waits} (an older worker's default): the next run moves them "
            f"to {settings.wait_states}, or set wait_states_dir to keep them where they are",
        )


def check_database(context: Context) -> Iterable[Finding]:
    """SQLite's integrity check and WAL mode on the state database."""
    result = integrity.check_database(context.settings)
    where = context.settings.db_path
    if result["ok"]:
        yield Finding("database", Status.OK, f"the database {where}: {result['integrity']}")
    else:
        yield Finding(
            "database",
            Status.FAIL,
            f"the database {where}: integrity {result['integrity']}, journal mode "
            f"{result['journal_mode']}: restore it from a backup or move it aside",
        )


def check_inbox(context: Context) -> Iterable[Finding]:
    inbox = context.settings.inbox
    if not inbox.exists():
        yield Finding(
            "inbox", Status.WARN, f"no inbox folder at {inbox}: create it, or set inbox_dir"
        )
    elif not inbox.is_dir() or not os.access(inbox, os.R_OK | os.X_OK):
        yield Finding(
            "inbox", Status.FAIL, f"the inbox {inbox} is not a readable folder: fix it or inbox_dir"
        )
    else:
        yield Finding("inbox", Status.OK, f"the inbox {inbox} is readable")
