"""Benchmarks of the batch cycle; prints one JSON object.

Every time is the median of several runs and sits beside a baseline measured in the same run
(`python -c pass`, or calling the agent directly), so the ratios mean something on any machine.

    python bench/bench_core.py [--repeat N]
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
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from worker.config import load_settings  # noqa: E402
from worker.store import Store  # noqa: E402
from worker.waits.record import save_wait  # noqa: E402
from worker.waits.state import WaitState  # noqa: E402

FAKE = REPO / "tests" / "fakes" / "fake_claude.py"


def timed(argv: list[str], env: dict[str, str], repeat: int, cwd: Path | None = None) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def worker(*args: str) -> list[str]:
    return [sys.executable, "-m", "worker", *args]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKER_")}
    env.update(
        {
            "WORKER_MACHINE_ID": "bench",
            "WORKER_REVIEW__ENABLED": "false",
            "WORKER_SUPERVISION__ENABLED": "false",
        }
    )
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # worker's state folders in the temporary folder, not in the user's state home; the
        # messages in each workspace's `inbox/` (allowed explicitly: the default is outside).
        env["XDG_STATE_HOME"] = os.environ["XDG_STATE_HOME"] = str(root / "state")
        env["WORKER_ALLOW_INBOX_IN_WORKSPACE"] = "true"
        empty = root / "empty"
        empty.mkdir()
        python = timed([sys.executable, "-c", "pass"], env, repeat)
        help_s = timed(worker("--help"), env, repeat)
        dry = timed(worker("run", "--dry-run", "--workspace", str(empty)), env, repeat)
        out["startup"] = {
            "python_c_pass_s": round(python, 4),
            "worker_help_s": round(help_s, 4),
            "dry_run_s": round(dry, 4),
            "help_ratio": round(help_s / python, 2),
            "dry_run_ratio": round(dry / python, 2),
            "goal_dry_run_s": 0.35,
            "dry_run_meets_goal": dry < 0.35,
        }

        # Idle run: 10,000 messages for other machines, 1,000 wait states not ready.
        busy = root / "busy"
        (busy / "inbox").mkdir(parents=True)
        (busy / "wait_states").mkdir()
        for n in range(10_000):
            (busy / "inbox" / f"m{n}.json").write_text(
                json.dumps(
                    {
                        "id": f"m{n}",
                        "from": "x",
                        "to": f"machine-{n % 7}",
                        "subject": "s",
                        "body": "b" * 200,
                        "status": "unread",
                    }
                )
            )
        now = datetime.now(UTC).isoformat()
        busy_env = {**env, "WORKER_INBOX": str(busy / "inbox")}
        busy_settings = load_settings(busy, env=busy_env)
        with Store(busy_settings.db_path) as store:  # waits as worker records them
            for n in range(1000):
                state = {
                    "taskId": f"w{n}",
                    "timestamp": now,
                    "reason": "r",
                    "waitFor": "approval",
                    "resumeWhen": "user_approval",
                    "context": {
                        "mode": "code-simple",
                        "model": "haiku",
                        "iteration": 1,
                        "outputSnippet": "...",
                    },
                }
                save_wait(busy_settings, WaitState.model_validate(state), store, name=f"w{n}.json")
        (busy / "worker.toml").write_text("[fallback]\nenabled = false\n")
        idle = timed(
            worker("run", "--json", "--workspace", str(busy)), busy_env, max(3, repeat // 2)
        )
        out["idle_run"] = {
            "messages": 10_000,
            "wait_states": 1000,
            "idle_run_s": round(idle, 4),
            "ratio_to_python": round(idle / python, 2),
            "goal_s": 1.0,
            "meets_goal": idle < 1.0,
        }

        # Overhead per iteration: worker's time for a 5-iteration task minus a 1-iteration
        # task (so start-up cancels out), beside calling the agent 5 times minus once.
        fake = root / "claude"
        fake.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
        fake.chmod(0o755)
        task_ws = root / "task"
        (task_ws / "inbox").mkdir(parents=True)

        runs = iter(range(1_000_000))

        def through_worker(n: int) -> float:
            script = root / f"script{n}.json"
            script.write_text(
                json.dumps(
                    {"answers": [{"status": "continue"}] * (n - 1) + [{"status": "success"}]}
                )
            )
            calls = root / f"calls{n}.jsonl"
            calls.unlink(missing_ok=True)  # the fake picks its answer by counting its calls
            agent_env = {
                **env,
                "WORKER_INBOX": str(task_ws / "inbox"),
                "FAKE_CLAUDE_SCRIPT": str(script),
                "WORKER_CLAUDE_BIN": str(fake),
                "FAKE_CLAUDE_LOG": str(calls),
            }
            # A new message each time: a message id that already ran is refused as a copy.
            task_id = f"t{next(runs)}"
            (task_ws / "inbox" / f"{task_id}.json").write_text(
                json.dumps(
                    {
                        "id": task_id,
                        "from": "x",
                        "to": "bench",
                        "subject": "s",
                        "body": "b",
                        "status": "unread",
                    }
                )
            )
            t0 = time.perf_counter()
            proc = subprocess.run(
                worker("run", "--json", "--mode", "code-complex", "--workspace", str(task_ws)),
                env=agent_env,
                capture_output=True,
                check=False,
            )
            elapsed = time.perf_counter() - t0
            report = json.loads(proc.stdout)
            if (report["outcome"], report["iterations"]) != ("success", n):
                raise SystemExit(f"benchmark run went wrong: {report}")
            return elapsed

        def direct(n: int) -> float:
            script = root / "direct.json"
            script.write_text(json.dumps({"answers": [{"status": "success"}]}))
            calls = root / "direct.jsonl"
            calls.unlink(missing_ok=True)
            agent_env = {**env, "FAKE_CLAUDE_SCRIPT": str(script), "FAKE_CLAUDE_LOG": str(calls)}
            t0 = time.perf_counter()
            for _ in range(n):
                subprocess.run(
                    [str(fake), "-p"],
                    input="hi",
                    env=agent_env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
            return time.perf_counter() - t0

        rounds = max(3, repeat // 2)
        w1 = statistics.median(through_worker(1) for _ in range(rounds))
        w5 = statistics.median(through_worker(5) for _ in range(rounds))
        d1 = statistics.median(direct(1) for _ in range(rounds))
        d5 = statistics.median(direct(5) for _ in range(rounds))
        per_iteration = ((w5 - w1) - (d5 - d1)) / 4
        out["iteration_overhead"] = {
            "worker_1_iteration_s": round(w1, 4),
            "worker_5_iterations_s": round(w5, 4),
            "direct_1_call_s": round(d1, 4),
            "direct_5_calls_s": round(d5, 4),
            "overhead_per_iteration_ms": round(per_iteration * 1000, 1),
            "ratio_5_iterations": round((w5 - w1) / (d5 - d1), 3),
            "goal_ms": 50,
            "meets_goal": per_iteration < 0.05,
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
