"""Benchmark phase 0: 1,000 wait states, none ready, against the local fake GitHub server.

Prints one JSON object: the time of a floor (listing the folder and reading each file, nothing
parsed) taken in turn with the warm phase 0, round after round (medians of at least 7), then
phase 0 cold (first look), warm (nothing changed on GitHub),
warm within the recheck interval, and after one unrelated comment; with the number of GitHub
requests that cost rate limit (a 304 costs none). Goal: under 1 s, no request per wait state
when nothing changed.

    python bench/bench_waits.py [--waits 1000] [--repos 10] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.github_server import FakeGitHub  # noqa: E402
from worker.config import load_settings  # noqa: E402
from worker.state.store import Store  # noqa: E402
from worker.waits import phase0  # noqa: E402
from worker.waits.record import save_wait  # noqa: E402
from worker.waits.state import WaitState  # noqa: E402

KINDS = (
    ["user_approval"] * 4
    + ["github_decision"] * 2
    + ["time", "intercom_message"] * 1
    + ["roosync_response", "time"]
)


def seed(ws: Path, fake: FakeGitHub, waits: int, repos: int) -> None:
    settings = load_settings(ws)
    store = Store(settings.db_path)
    now = datetime.now(UTC)
    for r in range(repos):
        fake.add_repo(f"acme/r{r}", collaborators={"alice": "write"})
    for i in range(waits):
        kind = KINDS[i % len(KINDS)]
        repo, number = f"acme/r{(i // len(KINDS)) % repos}", 1 + i
        github = kind in ("user_approval", "github_decision")
        if github:
            fake.add_issue(repo, number, age_s=7200)
        data: dict[str, Any] = {
            "taskId": f"{repo}#{number}" if github else f"msg-{i}",
            "timestamp": now - timedelta(minutes=30),
            "reason": "bench",
            "waitFor": "something",
            "resumeWhen": kind,
            "context": {"mode": "code-simple", "model": "haiku", "iteration": 1},
            "source": "github" if github else "inbox",
            "sourceRef": {"repo": repo, "number": number} if github else {},
        }
        if kind == "time":
            data["resumeAt"] = now + timedelta(hours=2)
        save_wait(settings, WaitState.model_validate(data), store)  # recorded, as worker does
    store.close()
    for i in range(50):  # unrelated inbox traffic the reply condition must skip
        (ws / "inbox" / f"other-{i}.json").write_text(
            json.dumps({"id": f"other-{i}", "from": "x", "to": "elsewhere", "body": "not for us"})
        )


def timed(fn: Any, repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--waits", type=int, default=1000)
    parser.add_argument("--repos", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    args.repeat = max(7, args.repeat)
    fake = FakeGitHub().start()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "inbox").mkdir(parents=True)
        os.environ.update(
            {
                "XDG_STATE_HOME": str(Path(tmp) / "state"),
                "WORKER_INBOX": str(ws / "inbox"),
                "WORKER_ALLOW_INBOX_IN_WORKSPACE": "true",
                "WORKER_MACHINE_ID": "bench",
                "WORKER_GITHUB_TOKEN": "test-token-abc",
                "WORKER_GITHUB__BASE_URL": fake.url,
                "WORKER_GITHUB__SECONDS_BETWEEN_REQUESTS": "0",
                "WORKER_WAITS__RECHECK_INTERVAL_S": "0",
            }
        )
        seed(ws, fake, args.waits, args.repos)
        settings = load_settings(ws)

        def floor() -> int:
            read = 0
            with os.scandir(settings.wait_states) as entries:
                for entry in entries:
                    if entry.name.endswith(".json"):
                        fd = os.open(entry.path, os.O_RDONLY)
                        while os.read(fd, 65536):
                            pass
                        os.close(fd)
                        read += 1
            return read

        def phase(s: Any = settings) -> phase0.WaitScan:
            with Store(s.db_path) as store:
                return phase0.scan(s, store)

        count = floor()
        t0 = time.perf_counter()
        cold = phase()
        cold_s = time.perf_counter() - t0
        before = len(fake.log)
        floors, warms = [], []
        for _ in range(args.repeat):  # in turn: a busier or quieter machine weighs on both
            floors.append(timed(floor, 1)[0])
            warm_time, warm = timed(phase, 1)
            warms.append(warm_time)
        base_s, warm_s = statistics.median(floors), statistics.median(warms)
        warm_requests = (len(fake.log) - before) / args.repeat
        throttled = load_settings(ws, waits={"recheck_interval_s": 300})
        before = len(fake.log)
        throttled_s, _ = timed(lambda: phase(throttled), args.repeat)
        throttled_requests = (len(fake.log) - before) / args.repeat
        fake.add_comment("acme/r0", 1, "a question, not an approval", login="alice")
        t0 = time.perf_counter()
        changed = phase()
        changed_s = time.perf_counter() - t0
    fake.stop()
    print(
        json.dumps(
            {
                "waits": count,
                "repos": args.repos,
                "ready": len(warm.ready),
                "pending": warm.pending,
                "floor_read_files_s": round(base_s, 4),
                "phase0_warm_vs_floor": round(warm_s / base_s, 2),
                "phase0_cold_s": round(cold_s, 4),
                "phase0_cold_costed_requests": cold.github_requests,
                "phase0_warm_s": round(warm_s, 4),
                "phase0_warm_costed_requests": warm.github_requests,
                "phase0_warm_requests_sent": warm_requests,
                "phase0_within_interval_s": round(throttled_s, 4),
                "phase0_within_interval_requests_sent": throttled_requests,
                "phase0_one_issue_changed_s": round(changed_s, 4),
                "phase0_one_issue_changed_costed_requests": changed.github_requests,
                "goal": {
                    "under_1s": warm_s < 1.0,
                    "no_request_per_wait": warm.github_requests == 0,
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
