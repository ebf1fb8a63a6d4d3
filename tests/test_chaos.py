"""Chaos: racing runs, a shared inbox read through stale listings, and kill -9 at random
points. Bounded by counts, never by time; each ends with the same accounting: every message
done exactly once (by id), none stranded in the inbox or `claimed/`, no claim left active,
no agent process left running.

`CHAOS_KILLS=100 python -m pytest tests/test_chaos.py -k kill` runs the kill test with 100
kills instead of the suite's 50.
"""

from __future__ import annotations

import os
import random
import sys
import time
from functools import partial
from pathlib import Path

import pytest

from tests.chaos_kit import (
    Accounting,
    account,
    drain,
    drop_messages,
    fork,
    history_gaps,
    kill_at_random,
    make_workspace,
    settings_of,
    wait_all,
)
from worker.sources.base import Listing
from worker.sources.inbox import InboxSource

KILLS = int(os.environ.get("CHAOS_KILLS", "50"))

# Forked workers, SIGKILL and an `sh` agent.
pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="needs Linux (fork from the test process)"
)


def assert_exactly_once(acc: Accounting, ids: list[str]) -> None:
    assert acc.stranded == [], f"stranded: {acc.stranded}"
    assert acc.rejected == []
    assert acc.active_claims == []
    assert acc.orphans == [], f"agents left running: {acc.orphans}"
    assert dict(acc.done) == dict.fromkeys(ids, 1), "each message done exactly once"
    assert dict(acc.replies) == dict.fromkeys(ids, 1), "each sender answered exactly once"


def test_eight_racing_runs_on_200_messages_complete_each_exactly_once(tmp_path: Path) -> None:
    """Eight processes run `run_once` on one workspace until it is idle: the workspace lock
    and the claims let each of 200 messages run once, and only once."""
    ws = make_workspace(tmp_path, "racer")
    ids = [f"m{i:03d}" for i in range(200)]
    drop_messages(ws / "inbox", ids)
    settings = settings_of(ws)
    codes = wait_all([fork(lambda: drain(settings)) for _ in range(8)])
    assert codes == [0] * 8
    acc = account(ws / "inbox", tmp_path, ids, [settings.db_path])
    assert_exactly_once(acc, ids)
    assert dict(acc.runs_of) == dict.fromkeys(ids, 1), "no agent ran a task twice"


def _stale_listings(delay_s: float) -> None:
    """Make the inbox's listing old by the time it is acted on (a synced drive's lag)."""
    listed = InboxSource.list

    def late(self: InboxSource) -> Listing:
        listing = listed(self)
        time.sleep(random.uniform(0, delay_s))
        return listing

    InboxSource.list = late  # type: ignore[method-assign]  # in a forked child only


def test_eight_workspaces_sharing_one_inbox_with_stale_listings_run_each_message_once(
    tmp_path: Path,
) -> None:
    """Eight workspaces (eight databases, eight locks) take messages from one inbox folder,
    each acting on a listing up to 30 ms old: only the atomic rename decides, a finished
    message is never taken back out of `done/`, and each message runs once."""
    inbox = tmp_path / "shared-inbox"
    spaces = [make_workspace(tmp_path, f"ws{i}", inbox=inbox) for i in range(8)]
    ids = [f"s{i:03d}" for i in range(80)]
    drop_messages(inbox, ids)
    all_settings = [settings_of(ws) for ws in spaces]
    pids = [fork(partial(drain, s, partial(_stale_listings, 0.03))) for s in all_settings]
    assert wait_all(pids) == [0] * 8
    acc = account(inbox, tmp_path, ids, [s.db_path for s in all_settings])
    assert_exactly_once(acc, ids)
    assert dict(acc.runs_of) == dict.fromkeys(ids, 1), "no agent ran a task twice"


def test_kill_9_at_random_points_then_recovery_with_a_short_lease(tmp_path: Path) -> None:
    """KILLS runs are killed with SIGKILL at a random moment (before, during or after the
    claim, the agent, the report, the release). After the 1 s lease, the next runs end the
    agents left behind, give every claim back in one step, and finish every message once."""
    ws = make_workspace(tmp_path, "victim", agent_sleep=0.05)
    ids = [f"k{i:03d}" for i in range(KILLS + 10)]
    drop_messages(ws / "inbox", ids)
    settings = settings_of(ws)
    rng = random.Random(1326)
    killed = sum(
        kill_at_random(partial(drain, settings, max_runs=1), rng, within_s=0.25)
        for _ in range(KILLS)
    )
    assert killed >= 1, "at least one run died by the kill"
    time.sleep(settings.lease_seconds + 0.2)  # every lease of a killed run has expired
    drain(settings)
    acc = account(ws / "inbox", tmp_path, ids, [settings.db_path])
    assert_exactly_once(acc, ids)
    # The history tells the truth: no run left `running`, a success on record for every
    # message done (the killed runs that finished their task included).
    still_open, not_recorded = history_gaps(settings.db_path, ids)
    assert still_open == [] and not_recorded == []
