"""Retention and the database: bounded growth of idle runs, pruning by age and size (also as
a dry run), at most once a day after a run, WAL, and `worker status --check`."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from worker.config import Settings, load_settings
from worker.run.runner import run_once
from worker.state.retention import LAST_PRUNE_KEY, after_run, decision_detail, prune
from worker.state.store import Store
from worker.waits.record import save_wait
from worker.waits.state import WaitState

from .conftest import run_worker

DAY = 86400.0


@pytest.fixture
def settings(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    return load_settings(workspace)


def test_an_idle_run_with_1000_waits_adds_at_most_1_kb_to_the_database(settings: Settings) -> None:
    """Measured in pages after a checkpoint, over 20 idle runs (a size, not a time)."""
    store = Store(settings.db_path)
    for i in range(1000):
        state = {
            "taskId": f"w{i}",
            "timestamp": datetime.now(UTC),
            "resumeWhen": "intercom_message",
            "context": {"mode": "code-simple", "model": "haiku", "iteration": 1},
        }
        save_wait(settings, WaitState.model_validate(state), store)  # as worker records it
    store.close()
    run_once(settings)  # the first run records every wait's check row once

    def size() -> int:
        with Store(settings.db_path) as store:
            store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            pages = store.db.execute("PRAGMA page_count").fetchone()[0]
            free = store.db.execute("PRAGMA freelist_count").fetchone()[0]
            return int((pages - free) * store.db.execute("PRAGMA page_size").fetchone()[0])

    before, runs = size(), 20
    for _ in range(runs):
        assert run_once(settings).outcome.value == "idle"
    growth = (size() - before) / runs
    assert growth <= 1024, f"{growth:.0f} bytes per idle run"
    with Store(settings.db_path) as store:
        detail = store.recent_decisions(1)[0]["detail"]
    assert isinstance(detail["kernel"]["paused"], int)  # a count, not a list of waits


def test_idle_decisions_keep_counts_and_taken_ones_keep_their_lists() -> None:
    detail = {"skipped": [{"a": 1}] * 7, "errors": ["e"] * 9, "kernel": {"paused": [1, 2]}}
    assert decision_detail(True, detail) == {
        "skipped": 7,
        "errors": ["e"] * 3,
        "kernel": {"paused": 2},
    }
    assert decision_detail(False, detail) is detail


def _history(settings: Settings, store: Store, age_days: float) -> int:
    """A run with an iteration, a decision and an ended claim, `age_days` old."""
    at = time.time() - age_days * DAY
    run_id = store.start_run("m", 1)
    store.add_iteration(
        run_id, 1, mode="m", model="x", iteration=1, status="success", duration_s=1.0,
        cost_usd=0.0, input_tokens=1, output_tokens=1,
    )  # fmt: skip
    store.record_decision(run_id, machine_id="m", latency_ms=1.0)
    store.claim(f"t{run_id}", "inbox", "m", 1, 60)
    store.release_claim(f"t{run_id}", "success")
    with store.transaction() as db:
        db.execute("UPDATE runs SET started_at = ?, ended_at = ? WHERE id = ?", (at, at, run_id))
        db.execute("UPDATE decisions SET at = ? WHERE run_id = ?", (at, run_id))
        db.execute("UPDATE claims SET lease_until = ? WHERE task_id = ?", (at, f"t{run_id}"))
    log = settings.logs / f"run-{run_id}"
    log.mkdir(parents=True)
    (log / "agent.log").write_bytes(b"x" * 1000)
    os.utime(log, (at, at))
    return run_id


def count(store: Store, table: str) -> int:
    return int(store.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def test_prune_deletes_what_is_past_its_retention_and_a_dry_run_only_counts(
    settings: Settings,
) -> None:
    with Store(settings.db_path) as store:
        old, new = _history(settings, store, 100), _history(settings, store, 1)
        dry = prune(settings, store, dry_run=True)
        assert (dry.runs, dry.iterations, dry.decisions, dry.claims) == (1, 1, 1, 1)
        assert dry.removed_logs == [f"run-{old}"] and count(store, "runs") == 2
        assert store.get(LAST_PRUNE_KEY) is None
        done = prune(settings, store)
        assert (done.runs, done.iterations, done.decisions, done.claims) == (1, 1, 1, 1)
        assert [r["id"] for r in store.recent_runs()] == [new]
        assert count(store, "iterations") == 1 and count(store, "decisions") == 1
    assert not (settings.logs / f"run-{old}").exists()
    assert (settings.logs / f"run-{new}").exists()


def test_logs_are_cut_to_their_size_cap_oldest_first(workspace: Path) -> None:
    settings = load_settings(workspace, retention={"logs_max_bytes": 2500})
    with Store(settings.db_path) as store:
        ids = [_history(settings, store, age) for age in (3, 2, 1)]
        report = prune(settings, store)
    assert report.removed_logs == [f"run-{ids[0]}"] and report.log_bytes == 1000
    assert sorted(p.name for p in settings.logs.iterdir()) == [f"run-{i}" for i in ids[1:]]


def test_pruning_after_a_run_happens_at_most_once_a_day(settings: Settings) -> None:
    with Store(settings.db_path) as store:
        now = time.time()
        assert after_run(settings, store, now=now) is not None
        _history(settings, store, 100)
        assert after_run(settings, store, now=now + 3600) is None  # not again within the day
        assert count(store, "runs") == 1
        assert after_run(settings, store, now=now + DAY + 1) is not None
        assert count(store, "runs") == 0


def test_prune_command_and_status_check(settings: Settings) -> None:
    with Store(settings.db_path) as store:
        _history(settings, store, 100)
    dry = run_worker(settings.workspace, "prune", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["runs"] == 1
    assert "deleted: 1 run(s)" in run_worker(settings.workspace, "prune").stdout
    check = run_worker(settings.workspace, "status", "--check", "--json")
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout)["check"] == {
        "ok": True,
        "integrity": "ok",
        "journal_mode": "wal",
    }


def test_status_check_fails_on_a_damaged_database(settings: Settings) -> None:
    """An index page overwritten with zeros: the check says so, and exits 1."""
    with Store(settings.db_path) as store:
        _history(settings, store, 1)
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = store.db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs_task'")
        number = page.fetchone()[0]
        size = store.db.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(settings.db_path.read_bytes())
    data[(number - 1) * size : number * size] = bytes(size)
    settings.db_path.write_bytes(bytes(data))
    result = run_worker(settings.workspace, "status", "--check")
    assert result.returncode == 1
    assert "database check: PROBLEM" in result.stdout
