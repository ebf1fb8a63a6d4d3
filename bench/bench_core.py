"""worker's own cost per iteration of the task loop, supervision on as shipped; prints JSON.

A task that takes 5 iterations through `worker run` minus one that takes 1 (start-up cancels
out), beside calling the same fake agent directly 5 times minus once: what is left, divided
by 4, is worker's overhead per iteration (prompt, verify, supervision, git progress, records).
The four measurements run in turn within each round and the overhead is the median over the
rounds (at least 7). The agent is tests/fakes/fake_claude.py, which prints real stream-json.
Start-up and the idle run have benches of their own (bench_startup.py, bench_idle.py).

Goal: <= 10 ms per iteration.

    python bench/bench_core.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import count
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import REPO, ROUNDS, child_env, environment_note, worker

FAKE = REPO / "tests" / "fakes" / "fake_claude.py"
GOAL_MS = 10.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    rounds = max(ROUNDS, parser.parse_args().rounds)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = child_env(
            {
                "XDG_STATE_HOME": str(root / "state"),
                "WORKER_MACHINE_ID": "bench",
                # The reviewers run after the task, not per iteration.
                "WORKER_REVIEW__ENABLED": "false",
                "WORKER_ALLOW_INBOX_IN_WORKSPACE": "true",
            }
        )
        fake = root / "claude"
        fake.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
        fake.chmod(0o755)
        ws = root / "task"
        (ws / "inbox").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(ws)], check=True)  # progress is measured in git
        (ws / ".gitignore").write_text("inbox/\n")
        task_ids = count()

        def through_worker(iterations: int) -> float:
            script = root / f"script{iterations}.json"
            answers = [{"status": "continue"}] * (iterations - 1) + [{"status": "success"}]
            script.write_text(json.dumps({"answers": answers}))
            calls = root / f"calls{iterations}.jsonl"
            calls.unlink(missing_ok=True)  # the fake picks its answer by counting its calls
            task_id = f"t{next(task_ids)}"  # an id that already ran is refused as a copy
            message = {"id": task_id, "from": "x", "to": "bench", "subject": "s", "body": "b"}
            (ws / "inbox" / f"{task_id}.json").write_text(json.dumps(message))
            agent_env = {
                **env,
                "WORKER_INBOX": str(ws / "inbox"),
                "FAKE_CLAUDE_SCRIPT": str(script),
                "WORKER_CLAUDE_BIN": str(fake),
                "FAKE_CLAUDE_LOG": str(calls),
            }
            argv = worker("run", "--json", "--mode", "code-complex", "--workspace", str(ws))
            t0 = time.perf_counter()
            proc = subprocess.run(argv, env=agent_env, capture_output=True, check=False)
            elapsed = time.perf_counter() - t0
            report = json.loads(proc.stdout)
            if (report["outcome"], report["iterations"]) != ("success", iterations):
                raise SystemExit(f"benchmark run went wrong: {report}")
            return elapsed

        def direct(calls_made: int) -> float:
            script = root / "direct.json"
            script.write_text(json.dumps({"answers": [{"status": "success"}]}))
            calls = root / "direct.jsonl"
            agent_env = {**env, "FAKE_CLAUDE_SCRIPT": str(script), "FAKE_CLAUDE_LOG": str(calls)}
            t0 = time.perf_counter()
            for _ in range(calls_made):
                calls.unlink(missing_ok=True)
                subprocess.run(
                    [str(fake), "-p"], input=b"hi", env=agent_env, capture_output=True, check=False
                )
            return time.perf_counter() - t0

        through_worker(1)  # warm-up: the state folder and database are created once
        per_round = []
        for _ in range(rounds):
            d1, w1, d5, w5 = direct(1), through_worker(1), direct(5), through_worker(5)
            per_round.append((w1, w5, d1, d5, ((w5 - w1) - (d5 - d1)) / 4))
    overhead_ms = statistics.median(r[4] for r in per_round) * 1000

    def med(i: int) -> float:
        return round(statistics.median(r[i] for r in per_round), 4)

    print(
        json.dumps(
            {
                "environment": environment_note(),
                "supervision": "on (the default)",
                "rounds": rounds,
                "worker_1_iteration_s": med(0),
                "worker_5_iterations_s": med(1),
                "direct_1_call_s": med(2),
                "direct_5_calls_s": med(3),
                "overhead_per_iteration_ms": round(overhead_ms, 1),
                "goal_ms": GOAL_MS,
                "meets_goal": overhead_ms <= GOAL_MS,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
