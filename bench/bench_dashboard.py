"""The dashboard (`worker dashboard`): page time with a long history, and what open live views
cost a running task; prints one JSON object.

Pages: a workspace with 10,000 recorded runs over the last year (27 a day; each with an
iteration, its tools and its decision) beside one with 100 (two pages of history), served the
same way on 127.0.0.1 and fetched in turn (A B B A); each page's median time, the goal (<= 200
ms at 10,000 runs) and the ratio to the small one. The spend page reads the last 30 days.

Live views: a running task (a child process that writes its heartbeat to the store, as the
loop's `Tracker` does, a thousand times over) timed alone, with 20 pages following `/events`
of the real `worker dashboard` (its own process), and alone again, round after round: the
ratios of the medians (wall and the task's CPU), the lone runs' ratio as the noise floor,
and the share of a core the dashboard used meanwhile.

    python bench/bench_dashboard.py [--runs 10000] [--rounds 7] [--views 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import ROUNDS

from worker.config import load_settings
from worker.state.progress import ensure as ensure_progress
from worker.state.store import Store
from worker.web.server import running

GOAL_MS = 200.0
PAGES = ("/", "/history", "/history?before={middle}", "/runs/{middle}", "/spend", "/queue")
DAY = 86400.0

# The running task: heartbeat writes as `progress.Tracker._write` makes them, with the JSON
# work of an agent event between them.
TASK = """
import json, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=5.0, isolation_level=None)
db.execute("PRAGMA journal_mode=WAL"); db.execute("PRAGMA synchronous=NORMAL")
run_id, writes = int(sys.argv[2]), int(sys.argv[3])
event = {"type": "assistant", "message": {"content": [{"type": "text", "text": "x" * 2000}]}}
t0 = time.perf_counter()
for i in range(writes):
    for _ in range(20):
        json.loads(json.dumps(event))
    db.execute("BEGIN IMMEDIATE")
    db.execute("UPDATE run_progress SET iteration = ?, tool = ?, updated_at = ? WHERE run_id = ?",
               (1 + i // 100, f"Bash: step {i}", time.time(), run_id))
    db.execute("COMMIT")
print(time.perf_counter() - t0, time.process_time())
"""


def fill(ws: Path, runs: int, days: float = 365) -> int:
    """`runs` finished runs over the last `days`, recorded as the loop records them; returns
    the id of one in the middle."""
    settings = load_settings(ws)
    now = time.time()
    with Store(settings.db_path) as store:
        ensure_progress(store)
        db = store.db
        db.execute("BEGIN")
        for n in range(runs):
            at = now - days * DAY * (runs - n) / runs
            run_id = db.execute(
                "INSERT INTO runs(started_at, ended_at, machine_id, pid, task_id, source,"
                " outcome, reason, modes, iterations, cost_usd, duration_s, reason_codes)"
                " VALUES (?, ?, 'bench', 1, ?, 'inbox', ?, 'done', '[\"code-simple\"]', 1, 0.2,"
                " 42.0, '[\"TASK_DONE\"]')",
                (at, at + 42, f"msg-{n}", "success" if n % 7 else "failure"),
            ).lastrowid
            db.execute(
                "INSERT INTO iterations(run_id, seq, mode, model, iteration, status, reason,"
                " duration_s, cost_usd, input_tokens, output_tokens) VALUES (?, 1, ?, 'haiku',"
                " 1, 'COMPLETE', 'done', 42.0, 0.2, 1000, 200)",
                (run_id, "code-simple" if n % 3 else "code-complex"),
            )
            db.execute(
                "INSERT INTO iteration_tools(run_id, seq, tools, files)"
                " VALUES (?, 1, '{\"Bash\": 3}', '[\"src/a.py\"]')",
                (run_id,),
            )
            db.execute(
                "INSERT INTO decisions(run_id, at, machine_id, task_id, source, mode,"
                " reason_codes, candidates, latency_ms) VALUES (?, ?, 'bench', ?, 'inbox',"
                " 'code-simple', '[\"INBOX_NEXT\"]', '[]', 1.0)",
                (run_id, at, f"msg-{n}"),
            )
        db.execute("COMMIT")
    return runs // 2 + 1


def page_times(small: Path, big: Path, rounds: int) -> dict[str, object]:
    middles = {small: fill(small, 100), big: fill(big, 10_000)}
    samples: dict[str, dict[str, list[float]]] = {p: {"small": [], "big": []} for p in PAGES}
    with running(load_settings(small)) as a, running(load_settings(big)) as b:
        clients = {
            "small": (httpx.Client(base_url=a.url), middles[small]),
            "big": (httpx.Client(base_url=b.url), middles[big]),
        }
        for n in range(rounds + 1):  # the first round warms up and is dropped
            order = list(clients.items())[:: 1 if n % 2 else -1]  # A B, then B A
            for page in PAGES:
                for name, (http, middle) in order:
                    t0 = time.perf_counter()
                    answer = http.get(page.format(middle=middle))
                    samples[page][name].append(time.perf_counter() - t0)
                    assert answer.status_code == 200, (page, answer.status_code)
        for http, _ in clients.values():
            http.close()
    result: dict[str, object] = {}
    for page, got in samples.items():
        small_ms = statistics.median(got["small"][1:]) * 1000
        big_ms = statistics.median(got["big"][1:]) * 1000
        result[page.split("?")[0] + ("?before" if "?" in page else "")] = {
            "ms_10000_runs": round(big_ms, 2),
            "ms_100_runs": round(small_ms, 2),
            "ratio": round(big_ms / small_ms, 2),
            "within_goal": big_ms <= GOAL_MS,
        }
    return result


def _start_task_run(ws: Path) -> int:
    settings = load_settings(ws)
    with Store(settings.db_path) as store:
        ensure_progress(store)
        run_id = store.start_run(settings.machine_id, os.getpid())
        store.db.execute(
            "INSERT INTO run_progress(run_id, task_id, title, mode, iteration, max_iterations,"
            " started_at, updated_at) VALUES (?, 'msg-live', 'Live', 'code-simple', 1, 20, ?, ?)",
            (run_id, time.time(), time.time()),
        )
    return run_id


async def _follow(url: str, views: int, stop: threading.Event, seen: list[int]) -> None:
    async def one(http: httpx.AsyncClient) -> None:
        async with http.stream("GET", "/events") as stream:
            async for line in stream.aiter_lines():
                if line.startswith("data:"):
                    seen.append(1)
                if stop.is_set():
                    return

    async with httpx.AsyncClient(base_url=url, timeout=None) as http:
        tasks = [asyncio.create_task(one(http)) for _ in range(views)]
        while not stop.is_set():
            await asyncio.sleep(0.1)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _dashboard(ws: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The real `worker dashboard` in its own process, as an operator starts it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = [sys.executable, "-m", "worker", "dashboard", "--port", str(port), "-w", str(ws)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            httpx.get(f"{url}/api/now", timeout=1)
            return proc, url
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the dashboard did not start")


def live_cost(ws: Path, rounds: int, views: int, writes: int) -> dict[str, object]:
    """The task timed alone, with `views` pages following it, and alone again, round after
    round; the two lone runs give the noise floor. The dashboard's own CPU is measured too."""
    settings = load_settings(ws)
    run_id = _start_task_run(ws)
    argv = [sys.executable, "-c", TASK, str(settings.db_path), str(run_id), str(writes)]

    def task() -> tuple[float, float]:
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
        return float(out[0]), float(out[1])

    got: dict[str, list[tuple[float, float]]] = {"alone": [], "watched": [], "alone_again": []}
    seen: list[int] = []
    server, url = _dashboard(ws)
    dash_cpu = dash_wall = 0.0
    try:
        task()  # warm-up
        for _ in range(rounds):
            got["alone"].append(task())
            stop = threading.Event()
            viewers = threading.Thread(target=asyncio.run, args=(_follow(url, views, stop, seen),))
            viewers.start()
            while len(seen) < views:
                time.sleep(0.05)  # every page has its first snapshot
            before, t0 = psutil.Process(server.pid).cpu_times(), time.perf_counter()
            got["watched"].append(task())
            after = psutil.Process(server.pid).cpu_times()
            dash_wall += time.perf_counter() - t0
            dash_cpu += (after.user + after.system) - (before.user + before.system)
            stop.set()
            viewers.join(30)
            seen.clear()
            got["alone_again"].append(task())
    finally:
        server.terminate()
        server.wait(30)
    wall = {k: statistics.median(w for w, _ in v) for k, v in got.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in got.items()}
    return {
        "views": views,
        "task_wall_s": {k: round(v, 4) for k, v in wall.items()},
        "task_cpu_s": {k: round(v, 4) for k, v in cpu.items()},
        "wall_ratio_watched_to_alone": round(wall["watched"] / wall["alone"], 3),
        "wall_ratio_noise_floor": round(wall["alone_again"] / wall["alone"], 3),
        "cpu_ratio_watched_to_alone": round(cpu["watched"] / cpu["alone"], 3),
        "cpu_ratio_noise_floor": round(cpu["alone_again"] / cpu["alone"], 3),
        "dashboard_cpu_share_while_watched": round(dash_cpu / dash_wall, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--views", type=int, default=20)
    parser.add_argument("--writes", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")
        os.environ["WORKER_MACHINE_ID"] = "bench"
        os.environ["WORKER_FALLBACK__ENABLED"] = "false"
        spaces = [root / name for name in ("small", "big", "live")]
        for ws in spaces:
            (ws / "inbox").mkdir(parents=True)
        os.environ["WORKER_INBOX"] = str(root / "inbox")
        (root / "inbox").mkdir()
        pages = page_times(spaces[0], spaces[1], args.rounds)
        live = live_cost(spaces[2], args.rounds, args.views, args.writes)
    print(
        json.dumps(
            {
                "goal_ms": GOAL_MS,
                "pages": pages,
                "live_views": live,
                "python": sys.version.split()[0],
                "cpus": os.cpu_count(),
                "rounds_interleaved": True,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
