"""Machines racing on one shared inbox and one PostgreSQL: every task runs exactly once."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet_machines import Fleet, wait_for
from tests.pg import PASSWORD, PgCluster

MACHINES = ("m1", "m2", "m3")


@pytest.fixture
def fleet(tmp_path: Path, pg_url: str) -> Iterator[Fleet]:
    fleet = Fleet(tmp_path, pg_url)
    yield fleet
    fleet.stop_all()


@pytest.mark.slow
def test_three_machines_times_four_runs_take_500_messages_exactly_once(fleet: Fleet) -> None:
    """12 servers (3 machine ids x 4) race on 500 `to: all` messages: each message is run
    by the agent once, lands in done/ once, and is recorded once as a success."""
    ids = fleet.messages(500)
    for name in MACHINES:
        for slot in range(4):
            fleet.serve(fleet.add(name, slot))
    wait_for(lambda: fleet.done() == 500, "500 messages done", timeout=1200)
    outputs = fleet.stop_all()

    runs = fleet.agent_runs()
    assert sorted(runs) == ids
    assert set(runs.values()) == {1}
    assert not list(fleet.inbox.glob("msg-????.json"))
    assert not list((fleet.inbox / "claimed").glob("*.json"))
    successes = fleet.query(
        "SELECT task_id, count(*) FROM fleet_runs WHERE outcome = 'success' GROUP BY task_id"
    )
    assert len(successes) == 500 and {n for _, n in successes} == {1}
    by_machine = dict(
        fleet.query("SELECT machine_id, count(*) FROM fleet_runs WHERE outcome = 'success'"
                    " GROUP BY machine_id")
    )  # fmt: skip
    assert set(by_machine) == set(MACHINES)
    # A run that lost the race for a file between its listing and its rename records its
    # claim `lost`: never run, never a second success (asserted above).
    states = {state for (state,) in fleet.query("SELECT DISTINCT state FROM fleet_claims")}
    assert "success" in states and states <= {"success", "lost"}
    assert all(PASSWORD not in out for out in outputs)


def test_a_task_whose_run_is_killed_comes_back_on_another_machine_after_the_lease(
    fleet: Fleet,
) -> None:
    """kill -9 of m1's run mid-task: its heartbeat stops, the lease runs out, m2 takes the
    message and finishes it; it is done once, and the agent ran twice (the killed try)."""
    fleet.extra_env["WORKER_LEASE_SECONDS"] = "3"
    fleet.messages(1)
    fleet.answers({"hang": 600, "child": True}, {"status": "success", "reason": "done"})
    m1 = fleet.serve(fleet.add("m1"))
    wait_for(
        lambda: fleet.query("SELECT 1 FROM fleet_claims WHERE state = 'active'") != [],
        "m1 to claim the message",
    )
    wait_for(
        lambda: (
            m1.log.exists()  # the fake agent has logged its call: it is under way
            and fleet.query("SELECT detail->'agent_pgid' FROM fleet_claims") != [(None,)]
        ),
        "m1's agent to start",
    )
    [(agent_group,)] = fleet.query("SELECT (detail->>'agent_pgid')::int FROM fleet_claims")
    assert m1.proc is not None
    m1.proc.kill()
    m1.proc.wait()
    os.killpg(agent_group, signal.SIGKILL)  # what a dead machine leaves running is not ours
    m2 = fleet.add("m2")
    m2.log = m1.log  # one call log: the fake agent's second answer is a success
    fleet.serve(m2, interval=0.5)
    wait_for(lambda: fleet.done() == 1, "the message to be done on m2")
    fleet.stop_all()

    assert fleet.agent_runs() == {"msg-0000": 2}
    rows = fleet.query("SELECT machine_id, outcome FROM fleet_runs WHERE task_id = 'msg-0000'")
    assert sorted(rows, key=str) == [("m1", None), ("m2", "success")]  # m1's run never ended
    reasons = fleet.query(
        "SELECT reason_codes FROM fleet_decisions WHERE machine_id = 'm2' AND task_id IS NOT NULL"
    )
    assert any("LEASE_EXPIRED" in codes for (codes,) in reasons)
    assert fleet.query("SELECT machine_id, state FROM fleet_claims") == [("m2", "success")]


def test_a_database_restart_mid_run_loses_nothing_and_runs_nothing_twice(
    fleet: Fleet, pg_cluster: PgCluster
) -> None:
    """Two machines on 30 messages; PostgreSQL is restarted twice while they work: the runs
    reconnect (or end and retry with exit 75), and every message is run once."""
    ids = fleet.messages(30)
    fleet.answers({"hang": 0.3, "status": "success", "reason": "done"})
    for name in ("m1", "m2"):
        fleet.serve(fleet.add(name), interval=0.2)
    for target in (5, 15):
        wait_for(lambda n=target: fleet.done() >= n, f"{target} messages done")
        pg_cluster.restart()
    wait_for(lambda: fleet.done() == 30, "30 messages done")
    outputs = fleet.stop_all()

    runs = fleet.agent_runs()
    assert sorted(runs) == ids and set(runs.values()) == {1}
    successes = fleet.query(
        "SELECT task_id, count(*) FROM fleet_runs WHERE outcome = 'success' GROUP BY task_id"
    )
    assert len(successes) == 30 and {n for _, n in successes} == {1}
    assert all(PASSWORD not in out for out in outputs)


def test_fleet_shows_every_machine_with_its_task_and_cancel_reaches_it(fleet: Fleet) -> None:
    """Three machines each busy with a message: `worker fleet`, `worker status --fleet` and
    `worker log --fleet` show all three with their tasks (from any machine); `worker cancel`
    written on m1 stops the task running on m3 through the database."""
    fleet.messages(3)
    fleet.answers({"hang": 600, "child": True})
    machines = [fleet.serve(fleet.add(name), interval=0.5) for name in MACHINES]
    wait_for(
        lambda: len(fleet.query("SELECT 1 FROM fleet_claims WHERE state = 'active'")) == 3,
        "three tasks running",
    )
    shown = fleet.cli("fleet", "--json")
    assert shown.returncode == 0, shown.stderr
    rows = {row["machine"]: row for row in json.loads(shown.stdout)["rows"]}
    assert set(rows) == set(MACHINES)
    running = dict(fleet.query("SELECT machine_id, task_id FROM fleet_claims"))
    for name in MACHINES:
        assert rows[name]["state"] == "running" and rows[name]["task"] == running[name]
    text = fleet.cli("fleet")
    assert all(name in text.stdout and running[name] in text.stdout for name in MACHINES)
    status = fleet.cli("status", "--fleet", machine=machines[1])
    assert all(running[name] in status.stdout for name in MACHINES), status.stdout
    log = json.loads(fleet.cli("log", "--fleet", "--json").stdout)
    assert {run["machine_id"] for run in log["runs"]} == set(MACHINES)

    cancelled = fleet.cli("cancel", running["m3"], "--reason", "not needed")
    assert cancelled.returncode == 0, cancelled.stderr
    wait_for(
        lambda: (
            fleet.query("SELECT state FROM fleet_claims WHERE machine_id = 'm3'")
            == [("cancelled",)]
        ),
        "m3 to obey the cancel order",
    )
    consumed = fleet.query("SELECT consumed_by FROM fleet_orders")
    assert consumed == [("m3",)]
    outputs = [shown.stdout, text.stdout, status.stdout, cancelled.stdout, *fleet.stop_all()]
    assert all(PASSWORD not in out for out in outputs)
    assert "postgresql://postgres:***@127.0.0.1" in text.stdout
