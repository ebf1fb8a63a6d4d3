"""The fleet database on a real PostgreSQL: migrations, claims and leases, the Store's seam,
the unreachable database (exit 75, nothing claimed), and passwords kept out of every text."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.conftest import FakeAgent, run_worker, write_message
from tests.pg import PASSWORD, PgCluster
from worker.config import load_settings
from worker.errors import ExitCode
from worker.fleet.claims import PgClaims
from worker.fleet.db import MIGRATIONS, FleetUnavailable, connect, migrate
from worker.fleet.link import Link
from worker.fleet.settings import FleetSettings, redact_url
from worker.models import Outcome
from worker.run.runner import RunOptions, run_once
from worker.state.store import Store

_OPEN: list[Link] = []


def _link(url: str) -> Link:
    _OPEN.append(Link(FleetSettings(database_url=url), retry_s=5.0))
    return _OPEN[-1]


@pytest.fixture(autouse=True)
def _close_links() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def test_migrations_build_the_schema_once_and_record_the_version(pg_url: str) -> None:
    """An empty database is migrated to the current version; opening again applies nothing."""
    conn = connect(FleetSettings(database_url=pg_url))
    tables = {
        row["table_name"]
        for row in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        )
    }
    assert {"fleet_migrations", "fleet_claims", "fleet_runs", "fleet_decisions"} <= tables
    assert {"fleet_machines", "fleet_reports", "fleet_orders"} <= tables
    assert migrate(conn, MIGRATIONS) == len(MIGRATIONS)
    versions = [r["version"] for r in conn.execute("SELECT version FROM fleet_migrations")]
    assert versions == list(range(1, len(MIGRATIONS) + 1))
    conn.close()


def test_machines_migrating_at_once_do_not_trip_over_each_other(pg_url: str) -> None:
    """Eight first connections racing on an empty database: all succeed, one schema."""
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            connect(FleetSettings(database_url=pg_url)).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM fleet_migrations").fetchone() == (
            len(MIGRATIONS),
        )


def test_of_many_racing_claims_on_one_task_exactly_one_wins(pg_url: str) -> None:
    """Sixteen machines claim the same task at once: one lease, fifteen refusals."""
    won: list[str] = []
    barrier = threading.Barrier(16)

    def race(n: int) -> None:
        claims = PgClaims(_link(pg_url), f"m{n}", 1000 + n)
        barrier.wait()
        if claims.claim("msg-1", "inbox", f"m{n}", 1000 + n, 60, run_id=n):
            won.append(f"m{n}")

    threads = [threading.Thread(target=race, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT machine_id FROM fleet_claims").fetchall() == [(won[0],)]


def test_a_repeated_claim_by_the_same_run_succeeds_and_another_run_is_refused(pg_url: str) -> None:
    """After a lost connection the claim is sent again: the run finds its own lease."""
    a = PgClaims(_link(pg_url), "a", 1)
    b = PgClaims(_link(pg_url), "b", 2)
    assert a.claim("t", "inbox", "a", 1, 60, run_id=7)
    assert a.claim("t", "inbox", "a", 1, 60, run_id=7)
    assert not b.claim("t", "inbox", "b", 2, 60, run_id=1)
    assert not a.claim("t", "inbox", "a", 1, 60, run_id=8)  # another run of the same process


def test_only_the_holder_releases_a_live_lease(pg_url: str) -> None:
    """A run whose lease was taken over cannot end the new holder's claim."""
    a = PgClaims(_link(pg_url), "a", 1)
    b = PgClaims(_link(pg_url), "b", 2)
    assert a.claim("t", "inbox", "a", 1, 60)
    b.release_claim("t", "success")
    assert a.claim_of("t")["state"] == "active"  # type: ignore[index]
    a.release_claim("t", "success")
    assert a.claim_of("t")["state"] == "success"  # type: ignore[index]
    assert b.claim("t", "inbox", "b", 2, 60)  # finished: `--task-id` may take it again


def test_an_expired_lease_comes_back_once_and_a_live_one_never(pg_url: str) -> None:
    """expire_claim marks a lease past its end once, so one run brings the task back."""
    a = PgClaims(_link(pg_url), "a", 1)
    assert a.claim("short", "inbox", "a", 1, 0.2)
    assert a.claim("long", "inbox", "a", 1, 60)
    assert not a.expire_claim("long")
    time.sleep(0.4)
    assert [c["task_id"] for c in a.expired_claims()] == ["short"]
    assert a.expire_claim("short")
    assert not a.expire_claim("short")
    assert PgClaims(_link(pg_url), "b", 2).claim("short", "inbox", "b", 2, 60)


def test_leases_follow_the_databases_clock_not_the_machines(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine whose clock is two hours ahead sees a fresh lease live, in its own clock."""
    a = PgClaims(_link(pg_url), "a", 1)
    assert a.claim("t", "inbox", "a", 1, 60)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 7200)
    assert a.expired_claims() == []
    claim = a.claim_of("t")
    assert claim is not None
    assert 7200 + 50 < claim["lease_until"] - real() < 7200 + 61
    assert not PgClaims(_link(pg_url), "b", 2).claim("t", "inbox", "b", 2, 60)


def test_a_lease_just_expired_is_brought_back_however_long_the_query_took(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's recovery compares the lease with the clock read after the database
    answered: each reading of the clock here is half a second after the last, as on a loaded
    machine, and a lease the database calls expired by 0.2 s is given back in this step,
    not left for a later one (where a run would lose the LEASE_EXPIRED that explains it)."""
    with Store(tmp_path / "state.db") as store:
        store.claims = PgClaims(_link(pg_url), "a", 1)
        assert store.claims.claim("t", "inbox", "a", 1, 0.2)
        time.sleep(0.4)
        given_back: list[str] = []
        real, readings = time.time, itertools.count()
        monkeypatch.setattr(time, "time", lambda: real() + 0.5 * next(readings))
        assert store.recover_claim("t", lambda claim: given_back.append(claim["task_id"]))
        monkeypatch.undo()
        assert given_back == ["t"]
        assert store.claims.claim_of("t")["state"] == "expired"  # type: ignore[index]


def test_the_heartbeat_renews_only_this_processes_live_leases(pg_url: str) -> None:
    a = PgClaims(_link(pg_url), "a", 1)
    b = PgClaims(_link(pg_url), "b", 2)
    assert a.claim("mine", "inbox", "a", 1, 1)
    assert b.claim("theirs", "inbox", "b", 2, 1)
    assert a.renew_all(600) == 1
    time.sleep(1.2)
    assert [c["task_id"] for c in a.expired_claims()] == ["theirs"]


def test_the_store_sends_every_claim_operation_through_an_attached_backend(
    pg_url: str, tmp_path: Path
) -> None:
    """With `claims` set, the SQLite claims table is untouched and PostgreSQL has the lease."""
    store = Store(tmp_path / "w.db")
    store.claims = PgClaims(_link(pg_url), "a", 1)
    assert store.claim("t", "inbox", "a", 1, 60, file="t.json", run_id=3)
    store.note_agent("t", 4242, "x")
    assert json.loads(store.claim_of("t")["detail"])["agent_pgid"] == 4242  # type: ignore[index]
    assert [c["task_id"] for c in store.active_claims()] == ["t"]
    store.release_claim("t", "success")
    assert store.db.execute("SELECT count(*) FROM claims").fetchone()[0] == 0
    store.claims = None
    assert store.claim_of("t") is None  # back to SQLite: its own (empty) table
    store.close()


def test_redact_url_hides_passwords_in_urls_and_dsns() -> None:
    assert redact_url("postgresql://bob:pa:ss@db:5432/w") == "postgresql://bob:***@db:5432/w"
    assert redact_url("see postgres://u:x@h/d and more") == "see postgres://u:***@h/d and more"
    assert redact_url("host=h password=hunter2 user=u") == "host=h password=*** user=u"
    assert redact_url("postgresql://bob@db/w") == "postgresql://bob@db/w"


def test_a_wrong_password_is_named_without_the_password(pg_cluster: PgCluster) -> None:
    """The error names the database and the failure; the password given is not in it."""
    url = pg_cluster.url(password="wrong-" + PASSWORD)
    with pytest.raises(FleetUnavailable) as caught:
        connect(FleetSettings(database_url=url))
    text = str(caught.value)
    assert "password authentication failed" in text
    assert f"127.0.0.1:{pg_cluster.port}" in text
    assert PASSWORD not in text and "wrong-" not in text


def test_a_run_that_cannot_reach_the_database_claims_nothing_and_exits_75(
    workspace: Path, fake_claude: object, pg_cluster: PgCluster
) -> None:
    """Nothing is claimed or run, the exit code says try later, the error has no password."""
    write_message(workspace, "msg-1")
    url = pg_cluster.url().replace(f":{pg_cluster.port}/", ":1/")  # nothing listens on port 1
    result = run_worker(workspace, "run", env={"WORKER_FLEET__DATABASE_URL": url})
    assert result.returncode == ExitCode.LOCKED == 75, result.stderr
    assert "fleet database postgresql://postgres:***@127.0.0.1:1/postgres" in result.stderr
    assert "unreachable" in result.stderr
    assert PASSWORD not in result.stdout + result.stderr
    assert (workspace / "inbox" / "msg-1.json").exists()
    assert fake_claude.calls == []  # type: ignore[attr-defined]


def test_a_non_postgres_url_is_a_configuration_error_without_its_password(
    workspace: Path,
) -> None:
    result = run_worker(
        workspace, "run", env={"WORKER_FLEET__DATABASE_URL": "mysql://u:topsecret@h/d"}
    )
    assert result.returncode == ExitCode.CONFIG
    assert "fleet.database_url" in result.stderr and "is not a postgresql:// URL" in result.stderr
    assert "topsecret" not in result.stderr


def test_an_order_for_one_task_is_consumed_once_and_one_for_all_by_every_machine(
    pg_url: str, tmp_path: Path
) -> None:
    """`worker cancel TASK` is obeyed by the machine that has the task; `worker cancel '*'`
    by every machine, each acknowledging it for itself."""
    from worker.config import load_settings
    from worker.fleet.orders import FleetOrders, send_order
    from worker.kernel.control import consume
    from worker.kernel.model import Order

    def machine(name: str) -> FleetOrders:
        settings = load_settings(tmp_path, env={}, machine_id=name, fleet={"database_url": pg_url})
        return FleetOrders(settings, _link(pg_url))

    m1, m2 = machine("m1"), machine("m2")
    send_order(m1.settings, "msg-1", Order.CANCEL, "not needed")
    send_order(m1.settings, "*", Order.STOP, "maintenance")
    seen = m1.orders()
    assert [(o.task_id, o.order, o.origin) for o in seen] == [
        ("msg-1", Order.CANCEL, "fleet"),
        ("*", Order.STOP, "fleet"),
    ]
    for order in seen:
        consume(order, "obeyed")
    assert m1.orders() == []
    assert [o.task_id for o in m2.orders()] == ["*"]


def test_an_expired_inbox_claim_is_brought_back_only_where_its_message_is(
    pg_url: str, tmp_path: Path
) -> None:
    """Machines sharing a database may keep inboxes of their own: m2 leaves m1's expired
    message alone (its lease stays for m1), and m1's next run brings it back."""
    from tests.conftest import write_message
    from worker.config import load_settings
    from worker.sources.inbox import InboxSource

    sources = []
    for name in ("m1", "m2"):
        ws = tmp_path / name
        (ws / "inbox").mkdir(parents=True)
        store = Store(ws / "state.db")
        store.claims = PgClaims(_link(pg_url), name, 1)
        settings = load_settings(
            ws,
            env={},
            machine_id=name,
            lease_seconds=1,
            inbox_dir=ws / "inbox",  # each machine's inbox of its own, allowed explicitly
            allow_inbox_in_workspace=True,
        )
        sources.append(InboxSource(settings, store))
    write_message(tmp_path / "m1", "msg-1", to="m1")
    m1, m2 = sources
    [task] = m1.list().tasks
    assert m1.claim(task, 1)
    time.sleep(1.3)
    assert m2.recover_expired() == []
    assert m1.recover_expired() == ["msg-1"]
    assert (tmp_path / "m1" / "inbox" / "msg-1.json").exists()
    for source in sources:
        assert source.store is not None
        source.store.close()


def test_the_fleet_order_hook_stays_silent_for_a_workspace_without_a_fleet(
    tmp_path: Path,
) -> None:
    """The hook is registered for the whole process once a fleet run happened in it; a run
    of a workspace with no database must not try to connect to one."""
    from worker.config import load_settings
    from worker.fleet.orders import FleetOrders

    assert FleetOrders(load_settings(tmp_path, env={})).orders() == []


def test_the_daily_cap_is_the_fleets_with_a_fleet_database(
    tmp_path: Path, pg_url: str, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`daily_cost_cap_usd` with a fleet database counts every machine's spend: after one
    machine spends $0.06 of a $0.05 cap, another machine's next task waits for tomorrow."""
    monkeypatch.setenv("WORKER_FLEET__DATABASE_URL", pg_url)
    monkeypatch.setenv("WORKER_DAILY_COST_CAP_USD", "0.05")
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    monkeypatch.setenv("WORKER_ALLOW_INBOX_IN_WORKSPACE", "true")
    fake_claude.answers({"status": "success", "reason": "done", "cost": 0.06})
    reports = {}
    for machine in ("m-first", "m-second"):
        ws = tmp_path / machine
        (ws / "inbox").mkdir(parents=True)
        monkeypatch.setenv("WORKER_INBOX", str(ws / "inbox"))
        monkeypatch.setenv("WORKER_MACHINE_ID", machine)
        write_message(ws, f"msg-{machine}", to=machine)
        reports[machine] = run_once(load_settings(ws), RunOptions())
    assert reports["m-first"].outcome is Outcome.SUCCESS
    second = reports["m-second"]
    assert (second.task_id, second.outcome) == ("msg-m-second", Outcome.WAITING)
    assert "DAILY_BUDGET_REACHED" in second.reason_codes
    assert len(fake_claude.task_calls) == 1  # the second machine's task never reached the agent


def test_a_wait_cancelled_from_the_command_line_ends_its_claim_on_the_fleet_database(
    workspace: Path, pg_url: str, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`worker waits cancel` on a fleet machine ends the task's fleet claim too: the fleet's
    view stops showing the task as waiting, and no other machine is left to think it taken."""
    monkeypatch.setenv("WORKER_FLEET__DATABASE_URL", pg_url)
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    write_message(workspace, "msg-fleet-wait")
    fake_claude.answers({"status": "wait", "wait_for": "Bob", "resume_when": "user_approval"})
    report = run_once(load_settings(workspace), RunOptions())
    assert (report.task_id, report.outcome) == ("msg-fleet-wait", Outcome.WAITING)

    def claim_state() -> str:
        with psycopg.connect(pg_url) as conn:
            row = conn.execute(
                "SELECT state FROM fleet_claims WHERE task_id = %s", ("msg-fleet-wait",)
            ).fetchone()
        assert row is not None
        return str(row[0])

    assert claim_state() == "waiting"
    result = run_worker(workspace, "waits", "cancel", "msg-fleet-wait", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["outcome"] == "cancelled"
    assert claim_state() == "cancelled"
    assert PASSWORD not in result.stdout + result.stderr


def test_a_wait_asked_for_on_another_fleet_machine_is_named_where_it_waits(
    tmp_path: Path, pg_url: str, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`worker waits approve` on a machine that does not have the wait says which machine
    has it (from the fleet's claims), instead of only "no wait state"; nothing is written."""
    monkeypatch.setenv("WORKER_FLEET__DATABASE_URL", pg_url)
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    monkeypatch.setenv("WORKER_ALLOW_INBOX_IN_WORKSPACE", "true")
    fake_claude.answers({"status": "wait", "wait_for": "Bob", "resume_when": "user_approval"})
    spaces = {}
    for machine in ("m-one", "m-two"):
        spaces[machine] = tmp_path / machine
        (spaces[machine] / "inbox").mkdir(parents=True)
    monkeypatch.setenv("WORKER_INBOX", str(spaces["m-one"] / "inbox"))
    monkeypatch.setenv("WORKER_MACHINE_ID", "m-one")
    write_message(spaces["m-one"], "msg-on-one", to="m-one")
    assert run_once(load_settings(spaces["m-one"]), RunOptions()).outcome is Outcome.WAITING

    env = {"WORKER_MACHINE_ID": "m-two", "WORKER_INBOX": str(spaces["m-two"] / "inbox")}
    for command in (("approve", "msg-on-one"), ("show", "msg-on-one"), ("cancel", "msg-on-one")):
        result = run_worker(spaces["m-two"], "waits", *command, env=env)
        assert result.returncode == ExitCode.USAGE, result.stderr
        assert "msg-on-one waits on machine m-one, not on this one (m-two)" in result.stderr
    unknown = run_worker(spaces["m-two"], "waits", "approve", "msg-nowhere", env=env)
    assert unknown.returncode == ExitCode.USAGE and "no wait state 'msg-nowhere'" in unknown.stderr
    local = run_worker(spaces["m-one"], "waits", "show", "msg-on-one", "--json")
    assert local.returncode == 0 and json.loads(local.stdout)["notes"] == []
