"""Benchmarks of the operator's view; prints one JSON object.

The heartbeat (`worker.state.progress.Tracker`) sits on the agent's event path: its cost per event
is measured beside the loop's quiet progress (`worker.run.loop._Quiet`) in the same run, so the
ratio means something on any machine. `worker status` and `worker queue` are timed beside
`worker --version` (the start-up of the same interpreter and package).

    python bench/bench_operator.py [--events N] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from worker.models import AgentEvent, EventKind, Task
from worker.run.loop import Progress, _Quiet
from worker.state.progress import Tracker
from worker.state.store import Store


def per_event(progress: Progress, events: list[AgentEvent]) -> float:
    t0 = time.perf_counter()
    for event in events:
        progress.event(event)
    return (time.perf_counter() - t0) / len(events)


def timed(argv: list[str], env: dict[str, str], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, check=False)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    # One tool call in 20 events, about what a coding agent's stream holds.
    events = [
        AgentEvent(EventKind.TOOL_CALL, tool="Bash", args={"command": "ls"})
        if n % 20 == 0
        else AgentEvent(EventKind.TEXT, text="x", output_tokens=3)
        for n in range(args.events)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "inbox").mkdir()
        with Store(ws / ".worker" / "worker.db") as store:
            tracker = Tracker(store, 1, Task("msg-1", "inbox", "bench"))
            tracker.step("code-simple", "haiku", 1, 5, 1, 0.0)
            quiet_s = per_event(_Quiet(), events)
            tracked_s = per_event(tracker, events)
        env = {k: v for k, v in os.environ.items() if not k.startswith("WORKER_")}
        env.update({"WORKER_MACHINE_ID": "bench", "WORKER_FALLBACK__ENABLED": "false"})
        cli = [sys.executable, "-m", "worker"]
        version_s = timed([*cli, "--version"], env, args.repeat)
        status_s = timed([*cli, "status", "--json", "-w", str(ws)], env, args.repeat)
        queue_s = timed([*cli, "queue", "--json", "-w", str(ws)], env, args.repeat)
    print(
        json.dumps(
            {
                "heartbeat_us_per_event": round(tracked_s * 1e6, 2),
                "quiet_us_per_event": round(quiet_s * 1e6, 3),
                "status_s": round(status_s, 3),
                "queue_s": round(queue_s, 3),
                "version_s": round(version_s, 3),
                "status_vs_version": round(status_s / version_s, 2),
                "queue_vs_version": round(queue_s / version_s, 2),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
