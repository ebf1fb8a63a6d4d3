"""Settings from worker.toml and WORKER_*; the SQLite store's migrations and leases; the
pure decision over a snapshot."""

from __future__ import annotations

import socket
import sqlite3
import time
from pathlib import Path

import pytest

from worker.config import load_settings
from worker.errors import ConfigError
from worker.kernel.scheduling import ReadyWait, Snapshot, decide
from worker.models import Task
from worker.sources.base import Listing
from worker.state.store import Store, script


def test_defaults_follow_the_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The state folder (and the inbox and wait states in it) in the user's state home, one
    folder per workspace: nothing of worker's in the user's repository."""
    xdg = tmp_path.parent / f"{tmp_path.name}-xdg"
    monkeypatch.setenv("XDG_STATE_HOME", str(xdg))
    settings = load_settings(tmp_path, env={})
    assert settings.machine_id == socket.gethostname()
    assert settings.state.parent == xdg / "worker"
    assert settings.wait_states == settings.state / "wait_states"
    assert settings.state.name.startswith(tmp_path.name + "-")
    assert settings.inbox == settings.state / "inbox"
    assert settings.claude_bin == "claude"


def test_toml_then_environment_with_sections(tmp_path: Path) -> None:
    (tmp_path / "worker.toml").write_text(
        'machine_id = "box"\nstate_dir = "/tmp/elsewhere"\n[fallback]\ninterval_hours = 2\n'
    )
    settings = load_settings(
        tmp_path,
        env={
            "WORKER_MACHINE_ID": "from-env",
            "WORKER_INBOX": "/srv/inbox",
            "WORKER_FALLBACK__TEST": '["make check"]',
            "WORKER_CLAUDE_BIN": "/opt/claude",
            "WORKER_GITHUB_TOKEN": "ghp_secret_is_not_a_setting",
        },
    )
    assert settings.machine_id == "from-env"
    assert settings.inbox == Path("/srv/inbox")
    assert settings.state == Path("/tmp/elsewhere")
    assert settings.fallback.interval_hours == 2 and settings.fallback.test == ["make check"]
    assert settings.claude_bin == "/opt/claude"
    assert "ghp_secret" not in settings.model_dump_json()


@pytest.mark.parametrize(
    ("env", "toml", "needle"),
    [
        ({"WORKER_LEASE_SECONDS": "-1"}, "", "lease_seconds"),
        ({}, "bogus = 1\n", "bogus"),
        ({}, "[fallback]\ninterval_hours = 'x'\n", "fallback.interval_hours"),
        ({}, "machine_id = 'a/b'\n", "machine_id"),
        ({"WORKER_FALLBACK__TEST": "[not json"}, "", "WORKER_FALLBACK__TEST"),
        ({}, "this is not toml", "worker.toml"),
    ],
)
def test_bad_configuration_names_the_key(
    tmp_path: Path, env: dict[str, str], toml: str, needle: str
) -> None:
    if toml:
        (tmp_path / "worker.toml").write_text(toml)
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")) as info:
        load_settings(tmp_path, env=env)
    assert info.value.exit_code == 78


def test_store_migrates_an_empty_database(tmp_path: Path) -> None:
    with Store(tmp_path / "w.db") as store:
        tables = {
            row[0]
            for row in store.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        assert {"runs", "iterations", "decisions", "claims", "kv", "migrations"} <= tables
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # Opening again applies nothing twice.
    with Store(tmp_path / "w.db") as store:
        rows = store.db.execute("SELECT component, version FROM migrations").fetchall()
        assert [tuple(r) for r in rows if r[0] == "core"] == [("core", 1), ("core", 2)]
        indexes = {
            r[0] for r in store.db.execute("SELECT name FROM sqlite_master WHERE type='index'")
        }
        assert {"iterations_run", "decisions_run"} <= indexes


def test_component_migrations_run_once_in_order(tmp_path: Path) -> None:
    seen: list[int] = []

    def v1(db: sqlite3.Connection) -> None:
        seen.append(1)
        db.execute("CREATE TABLE extra (x INTEGER)")

    def v2(db: sqlite3.Connection) -> None:
        seen.append(2)
        db.execute("ALTER TABLE extra ADD COLUMN y TEXT")

    with Store(tmp_path / "w.db") as store:
        store.ensure("extra", [v1])
        store.ensure("extra", [v1, v2])
        store.ensure("extra", [v1, v2])
    assert seen == [1, 2]


def test_a_migration_that_fails_halfway_leaves_nothing_and_is_retried_whole(
    tmp_path: Path,
) -> None:
    """A migration's statements run inside `ensure`'s transaction: a failing one takes the
    tables before it back with it, so the next open applies the migration cleanly (with
    `executescript()` the first table stayed, and every later open failed on it)."""
    broken = "CREATE TABLE first (x INTEGER);\nCREATE TABLE second (x INTEGER) nonsense;\n"
    fixed = "CREATE TABLE first (x INTEGER);\nCREATE TABLE second (x INTEGER);\n"
    with Store(tmp_path / "w.db") as store:
        with pytest.raises(sqlite3.OperationalError):
            store.ensure("extra", [lambda db: script(db, broken)])
        store.ensure("extra", [lambda db: script(db, fixed)])
        tables = {row[0] for row in store.db.execute("SELECT name FROM sqlite_master")}
        assert {"first", "second"} <= tables
    with pytest.raises(ValueError, match="unfinished"), Store(tmp_path / "v.db") as store:
        store.ensure("extra", [lambda db: script(db, "CREATE TABLE t (x INTEGER)")])


def test_a_lease_blocks_until_it_expires_or_is_released(tmp_path: Path) -> None:
    with Store(tmp_path / "w.db") as store:
        assert store.claim("t", "inbox", "m", 1, lease_s=0.2)
        assert not store.claim("t", "inbox", "m", 2, lease_s=10)
        time.sleep(0.25)
        assert [c["task_id"] for c in store.expired_claims()] == ["t"]
        assert store.claim("t", "inbox", "m", 2, lease_s=10)
        store.release_claim("t", "done")
        assert store.claim("t", "inbox", "m", 3, lease_s=10)  # a rerun may take it again


def _task(task_id: str, source: str) -> Task:
    return Task(task_id, source, task_id)


def test_decision_priority_wait_then_inbox_then_github_then_fallback() -> None:
    inbox = Listing("inbox", [_task("i1", "inbox")])
    github = Listing("github", [_task("o/r#1", "github")])
    fallback = Listing("fallback", [_task("maintenance-x", "fallback")])
    wait = ReadyWait(_task("w1", "inbox"), waiting_since=10.0, answer="yes")
    older = ReadyWait(_task("w0", "inbox"), waiting_since=5.0, answer="yes")
    snap = Snapshot(listings=(inbox, github, fallback), ready_waits=(wait, older))
    decision = decide(snap)
    assert (decision.task.id, decision.source) == ("w0", "wait")  # type: ignore[union-attr]
    assert decision.reason_codes[0] == "WAIT_STATE_RESUMED"
    assert decide(Snapshot(listings=(inbox, github, fallback))).reason_codes[0] == (
        "INBOX_TASK_SELECTED"
    )
    assert decide(Snapshot(listings=(Listing("inbox"), github, fallback))).source == "github"
    last = decide(Snapshot(listings=(Listing("inbox"), Listing("github"), fallback)))
    assert last.reason_codes[0] == "FALLBACK_MAINTENANCE"
    idle = decide(Snapshot(listings=(Listing("inbox"),)))
    assert idle.task is None and idle.reason_codes[0] == "NOTHING_TO_DO"


def test_decision_skips_candidates_lost_to_another_run() -> None:
    inbox = Listing("inbox", [_task("a", "inbox"), _task("b", "inbox")])
    decision = decide(Snapshot(listings=(inbox,), excluded=frozenset({"a"})))
    assert decision.task is not None and decision.task.id == "b"
    assert "CLAIM_LOST" in decision.reason_codes
    assert decision.candidates["inbox"] == 2


def test_decision_is_deterministic() -> None:
    inbox = Listing("inbox", [_task("a", "inbox")], errors=["x.json: bad"])
    snap = Snapshot(listings=(inbox,))
    assert decide(snap) == decide(snap)
    assert "SOURCE_ERROR" in decide(snap).reason_codes
