"""Benchmarks of the fleet database; prints one JSON object.

- claims per second: 8 processes race to claim the same 2,000 task ids in the same order (the
  worst case: every claim is contended), through PostgreSQL (`worker.fleet.claims.PgClaims`)
  and through one SQLite store shared by the 8 processes on this host (`worker.state.store.Store`);
- idle-run overhead: `run_once` in-process on an empty inbox with and without the fleet
  database (the database's round trips: connect, migrations check, run, decision, heartbeat
  sign-off), and the whole `worker run` process (which also pays psycopg's import).

With no `--database-url`, a throwaway PostgreSQL is started the way the tests start theirs
(initdb + pg_ctl in a temporary folder, 127.0.0.1).

    python bench/bench_fleet.py [--database-url URL] [--tasks N] [--repeat N]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from worker.fleet.settings import FleetSettings, redact_url  # noqa: E402  (after sys.path)

PROCESSES = 8


def _racer(kind: str, target: str, ids: list[str], start: object, out: object) -> None:
    from worker.fleet.claims import PgClaims
    from worker.fleet.link import Link
    from worker.state.store import Store

    pid = os.getpid()
    if kind == "postgresql":
        backend = PgClaims(Link(FleetSettings(database_url=target)), f"m{pid}", pid)
        claim = backend.claim
    else:
        store = Store(Path(target))
        claim = store.claim
    won = 0
    start.wait()  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    for task_id in ids:
        won += claim(task_id, "bench", f"m{pid}", pid, 600)
    out.put((won, len(ids), time.perf_counter() - t0))  # type: ignore[attr-defined]


def race(kind: str, target: str, tasks: int) -> dict[str, object]:
    ids = [f"{kind}-{n}" for n in range(tasks)]
    start, out = mp.Event(), mp.Queue()
    procs = [
        mp.Process(target=_racer, args=(kind, target, ids, start, out)) for _ in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    time.sleep(1.0)  # every racer connected and waiting
    t0 = time.perf_counter()
    start.set()
    results = [out.get(timeout=600) for _ in procs]
    wall = time.perf_counter() - t0
    for proc in procs:
        proc.join()
    won = sum(r[0] for r in results)
    attempts = sum(r[1] for r in results)
    return {
        "processes": PROCESSES,
        "tasks": tasks,
        "claims_won": won,
        "exactly_once": won == tasks,
        "attempts": attempts,
        "wall_s": round(wall, 3),
        "claims_per_s": round(won / wall, 1),
        "attempts_per_s": round(attempts / wall, 1),
    }


def idle_runs(url: str, repeat: int) -> dict[str, object]:
    from worker.config import load_settings
    from worker.fleet.session import close_parked
    from worker.run.runner import RunOptions, run_once

    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKER_")}
    env.update(WORKER_MACHINE_ID="bench", WORKER_FALLBACK__ENABLED="false")
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "inbox").mkdir()

        def in_process() -> tuple[float, float, float]:
            """SQLite, fleet (kept connection) and fleet (new connection) runs, interleaved so
            that the load of the moment weighs on the three alike; their medians."""
            plain = load_settings(ws, env=env)
            fleet = load_settings(ws, env=env, fleet={"database_url": url})
            samples: tuple[list[float], list[float], list[float]] = ([], [], [])
            for n in range(repeat + 1):
                for kind, settings in enumerate((plain, fleet, fleet)):
                    if kind == 2:
                        close_parked()  # as a `worker run` from cron: a new connection
                    t0 = time.perf_counter()
                    run_once(settings, RunOptions())
                    if n:  # the first round warms caches
                        samples[kind].append(time.perf_counter() - t0)
            close_parked()
            sqlite_s, kept_s, fresh_s = (statistics.median(s) for s in samples)
            return sqlite_s, kept_s, fresh_s

        def process() -> tuple[float, float]:
            """Whole `worker run` processes, without and with the fleet, interleaved."""
            argv = [sys.executable, "-m", "worker", "run", "--workspace", str(ws)]
            envs = (env, {**env, "WORKER_FLEET__DATABASE_URL": url})
            samples: tuple[list[float], list[float]] = ([], [])
            for _ in range(max(5, repeat // 3)):
                for kind, run_env in enumerate(envs):
                    t0 = time.perf_counter()
                    subprocess.run(argv, env=run_env, capture_output=True, check=True)
                    samples[kind].append(time.perf_counter() - t0)
            return statistics.median(samples[0]), statistics.median(samples[1])

        sqlite_s, fleet_s, fresh_s = in_process()
        sqlite_p, fleet_p = process()
    overhead_ms = (fleet_s - sqlite_s) * 1000
    return {
        "in_process_sqlite_s": round(sqlite_s, 4),
        "in_process_fleet_s": round(fleet_s, 4),
        "round_trip_overhead_ms": round(overhead_ms, 2),
        "goal_overhead_ms": 20,
        "meets_goal": overhead_ms <= 20,
        "with_new_connection_overhead_ms": round((fresh_s - sqlite_s) * 1000, 2),
        "connect_ms": round(connect_ms(url, repeat), 2),
        "process_sqlite_s": round(sqlite_p, 4),
        "process_fleet_s": round(fleet_p, 4),
        "process_overhead_ms": round((fleet_p - sqlite_p) * 1000, 1),
        "note": "round trips over the connection a `worker serve` keeps between runs; a"
        " `worker run` also pays a new connection (connect_ms) and psycopg's import",
    }


def connect_ms(url: str, repeat: int) -> float:
    """A new connection with the URL's login (a password: SCRAM-SHA-256, two round trips)."""
    import psycopg

    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        psycopg.connect(url).close()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000


@contextlib.contextmanager
def database(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from tests.pg import PgCluster, _free_port, find_bin

    pg_ctl = find_bin("pg_ctl")
    if pg_ctl is None:
        raise SystemExit("no pg_ctl found: pass --database-url or install PostgreSQL")
    root = Path(tempfile.mkdtemp(prefix="worker-bench-pg-"))
    cluster = PgCluster(pg_ctl.resolve().parent, root, _free_port(), _user())
    cluster.init()
    cluster.start()
    try:
        yield cluster.create_database()
    finally:
        cluster.stop("immediate")
        subprocess.run(["rm", "-rf", str(root)], check=False)


def _user() -> str | None:
    return "postgres" if os.geteuid() == 0 else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", default=os.environ.get("WORKER_FLEET__DATABASE_URL"))
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=21)
    args = parser.parse_args()
    with database(args.database_url) as url, tempfile.TemporaryDirectory() as tmp:
        from worker.fleet.db import connect

        connect(FleetSettings(database_url=url)).close()  # migrated before the race
        pg = race("postgresql", url, args.tasks)
        sqlite = race("sqlite", str(Path(tmp) / "shared.db"), args.tasks)
        out = {
            "database": redact_url(url),
            "claims": {
                "postgresql": pg,
                "sqlite_one_host": sqlite,
                "ratio_pg_to_sqlite": round(
                    float(pg["claims_per_s"]) / float(sqlite["claims_per_s"]),
                    2,  # type: ignore[arg-type]
                ),
            },
            "idle_run": idle_runs(url, args.repeat),
        }
    import json

    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
