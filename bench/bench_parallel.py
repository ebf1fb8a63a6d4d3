"""Several tasks at once (`max_parallel`): 8 tasks of an agent that takes 15 s each, with 4 slots
under `worker serve`, against the same 8 run one after another (`worker run` back to back, as
a serial workspace does them at best) in the same invocation; prints JSON.

The agent is the slot tests' stand-in (tests/fakes/slot_agent.py around the fake `claude`, real
stream-json), which records each start and end with its pid: the figures come from that record.
Each task works in a worktree of its own, on its own branch, and the bench checks each ran once.

Goal (issue 42): all 8 done within 1.4 x two task-lengths, plus the start-up (serve's start to
the first agent's), each exactly once, each on its own branch. Also measured: what an extra slot
costs, in memory (the peak RSS of a slot's `worker run` process, its agent apart) and in
start-up (the delay between one slot's agent start and the next's while the slots fill).

    python bench/bench_parallel.py [--task-s 15] [--tasks 8] [--slots 4] [--quick]

`--quick` makes each task 3 s (the same shape, a shorter run).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import REPO, child_env, environment_note, worker

SLOT_AGENT = REPO / "tests" / "fakes" / "slot_agent.py"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task-s", type=float, default=15.0)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="3 s tasks")
    args = parser.parse_args()
    task_s = 3.0 if args.quick else args.task_s
    with tempfile.TemporaryDirectory() as tmp:
        serial = serial_run(Path(tmp) / "serial", task_s, args.tasks)
        parallel = parallel_run(Path(tmp) / "parallel", task_s, args.tasks, args.slots)
    startup = parallel["first_agent_after_s"]
    goal_s = 1.4 * 2 * task_s + startup
    out = {
        "bench": "parallel",
        "tasks": args.tasks,
        "slots": args.slots,
        "task_s": task_s,
        "serial_wall_s": serial["wall_s"],
        "parallel_wall_s": parallel["wall_s"],
        "ratio_parallel_to_serial": round(parallel["wall_s"] / serial["wall_s"], 3),
        "first_start_to_last_end_s": parallel["span_s"],
        "goal_s": round(goal_s, 2),
        "within_goal": parallel["wall_s"] <= goal_s,
        "each_exactly_once": serial["once"] and parallel["once"],
        "each_on_its_own_branch": parallel["branches"] == args.tasks,
        "most_agents_at_once": parallel["most_alive"],
        "per_extra_slot": {
            "start_delay_s": parallel["slot_start_delay_s"],
            "run_process_peak_rss_mb": parallel["run_rss_mb"],
        },
        "serial_startup_per_task_s": round(serial["wall_s"] / args.tasks - task_s, 3),
        **environment_note(),
        "rounds_interleaved": False,  # one round of each: a task takes 15 s
    }
    print(json.dumps(out, indent=2))


def workspace(root: Path, task_s: float, tasks: int, slots: int) -> tuple[Path, dict[str, str]]:
    """A git workspace with `tasks` messages and the stand-in agent; the runs' environment."""
    ws = root / "ws"
    (ws / "inbox").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=ws, check=True)
    (ws / ".gitignore").write_text("inbox/\n")
    subprocess.run(["git", "add", "-A"], cwd=ws, check=True)
    ident = ["-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run(["git", *ident, "commit", "-qm", "init"], cwd=ws, check=True)
    for n in range(tasks):
        message = {
            "id": f"msg-{n}",
            "from": "alice",
            "to": "bench",
            "subject": f"task {n}",
            "body": "Please do the thing.",
            "status": "unread",
            "priority": "normal",
            "created_at": f"2026-11-20T10:00:{n:02d}Z",
        }
        (ws / "inbox" / f"msg-{n}.json").write_text(json.dumps(message))
    agent = root / "claude"
    agent.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{SLOT_AGENT}" "$@"\n')
    agent.chmod(0o755)
    script = root / "answers.json"
    answer = {"hang": task_s, "status": "success", "reason": "done"}
    script.write_text(json.dumps({"answers": [answer]}))
    env = child_env(
        {
            "PYTHONPATH": str(REPO),
            "XDG_STATE_HOME": str(root / "state"),
            "WORKER_MACHINE_ID": "bench",
            "WORKER_INBOX": str(ws / "inbox"),
            "WORKER_ALLOW_INBOX_IN_WORKSPACE": "true",
            "WORKER_SANDBOX__MODE": "off",
            "WORKER_SANDBOX__UNTRUSTED_MODE": "off",
            "WORKER_REVIEW__ENABLED": "false",
            "WORKER_FALLBACK__ENABLED": "false",
            "WORKER_CLAUDE_BIN": str(agent),
            "WORKER_MAX_PARALLEL": str(slots),
            "FAKE_CLAUDE_SCRIPT": str(script),
            "FAKE_CLAUDE_LOG": str(root / "calls.jsonl"),
            "SLOT_AGENT_LOG": str(root / "agents.jsonl"),
        }
    )
    return ws, env


def events(root: Path) -> list[dict[str, object]]:
    lines = (root / "agents.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def once(root: Path, tasks: int) -> bool:
    starts = Counter(e["task"] for e in events(root) if e["event"] == "start")
    return sorted(starts.values()) == [1] * tasks


def serial_run(root: Path, task_s: float, tasks: int) -> dict[str, object]:
    """The baseline: one `worker run` after another, as one slot does them at best."""
    ws, env = workspace(root, task_s, tasks, 1)
    t0 = time.monotonic()
    for _ in range(tasks):
        argv = worker("run", "--quiet", "--use-worktree", "--workspace", str(ws))
        subprocess.run(argv, env=env, check=True, capture_output=True)
    return {"wall_s": round(time.monotonic() - t0, 2), "once": once(root, tasks)}


def parallel_run(root: Path, task_s: float, tasks: int, slots: int) -> dict[str, object]:
    """`worker serve` with `slots` slots until it has made `tasks` runs."""
    ws, env = workspace(root, task_s, tasks, slots)
    argv = worker("serve", "--quiet", "--use-worktree", "--max-cycles", str(tasks))
    t0, wall0 = time.monotonic(), time.time()
    proc = subprocess.Popen([*argv, "--workspace", str(ws)], env=env, stdout=subprocess.DEVNULL)
    rss: dict[int, float] = {}
    sampler = threading.Thread(target=sample_runs, args=(proc.pid, rss), daemon=True)
    sampler.start()
    proc.wait()
    wall = time.monotonic() - t0
    seen = events(root)
    starts = sorted(float(str(e["at"])) for e in seen if e["event"] == "start")
    ends = [float(str(e["at"])) for e in seen if e["event"] == "end"]
    alive = most = 0
    for event in seen:
        alive += 1 if event["event"] == "start" else -1
        most = max(most, alive)
    gaps = [b - a for a, b in itertools.pairwise(starts[:slots])]  # while the slots fill
    branches = subprocess.run(
        ["git", "branch", "--list", "worker/*"], cwd=ws, capture_output=True, text=True
    ).stdout.split()
    return {
        "wall_s": round(wall, 2),
        "span_s": round(max(ends) - min(starts), 2),
        "first_agent_after_s": round(min(starts) - wall0, 2),
        "slot_start_delay_s": round(statistics.median(gaps), 3) if gaps else 0.0,
        "run_rss_mb": round(statistics.median(rss.values()), 1) if rss else None,
        "most_alive": most,
        "once": once(root, tasks),
        "branches": len(branches),
    }


def sample_runs(serve_pid: int, peak: dict[int, float]) -> None:
    """The peak RSS of each `worker run` process serve starts, sampled while it lives."""
    try:
        serve = psutil.Process(serve_pid)
        while serve.is_running() and serve.status() != psutil.STATUS_ZOMBIE:
            for child in serve.children():
                try:
                    if "run" in child.cmdline():
                        mb = child.memory_info().rss / 2**20
                        peak[child.pid] = max(peak.get(child.pid, 0.0), mb)
                except psutil.Error:
                    continue
            time.sleep(0.2)
    except psutil.Error:
        return


if __name__ == "__main__":
    main()
