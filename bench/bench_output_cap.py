"""worker's memory and log size when the agent prints one enormous line; prints one JSON object.

A fake `claude` (tests/fakes/fake_claude.py) answers one inbox task with a single stream-json
event of `--mb` megabytes (200 by default), then its STATUS block. `worker run` runs in a
child process that reports its own peak resident memory (`ru_maxrss`); the baseline is the
same run with an ordinary answer, measured in the same invocation.

    python bench/bench_output_cap.py [--mb 200]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAKE = REPO / "tests" / "fakes" / "fake_claude.py"
GOAL_PEAK_MB = 400
GOAL_LOG_MB = 70

# Runs `worker run` in this process and writes its peak RSS (bytes) to argv[1].
PROBE = """
import resource, runpy, sys
out, sys.argv = sys.argv[1], ["worker", *sys.argv[2:]]
try:
    runpy.run_module("worker", run_name="__main__")
finally:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    factor = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    open(out, "w").write(str(peak * factor))
"""


def one_run(root: Path, name: str, answer: dict[str, object]) -> dict[str, float]:
    ws, inbox, state_home = root / name, root / f"{name}-inbox", root / f"{name}-state"
    for folder in (ws, inbox, state_home):
        folder.mkdir(parents=True)
    wrapper = root / f"{name}-claude"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    wrapper.chmod(0o755)
    script = root / f"{name}-script.json"
    script.write_text(json.dumps({"answers": [answer]}))
    message = {
        "id": "msg-big",
        "from": "bench",
        "to": "bench",
        "subject": "print a lot",
        "body": "-",
        "status": "unread",
        "priority": "normal",
        "created_at": "2026-11-26T08:00:00Z",
    }
    (inbox / "msg-big.json").write_text(json.dumps(message))
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKER_")}
    env.update(
        {
            "WORKER_MACHINE_ID": "bench",
            "WORKER_INBOX": str(inbox),
            "WORKER_CLAUDE_BIN": str(wrapper),
            "WORKER_REVIEW__ENABLED": "false",
            "FAKE_CLAUDE_SCRIPT": str(script),
            "XDG_STATE_HOME": str(state_home),
        }
    )
    peak_file = root / f"{name}-peak"
    argv = [sys.executable, "-c", PROBE, str(peak_file), "run", "--workspace", str(ws)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 1):  # 1: the task failed (the supervisor may stop it)
        raise SystemExit(f"worker run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    logs = list(state_home.rglob("iteration-1.jsonl"))
    return {
        "peak_rss_mb": round(int(peak_file.read_text()) / 2**20, 1),
        "log_mb": round(sum(p.stat().st_size for p in logs) / 2**20, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200, help="the size of the line")
    parser.add_argument("--lines", type=int, default=1, help="how many such lines")
    args = parser.parse_args()
    size = args.mb * 2**20
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        baseline = one_run(root, "baseline", {"status": "success", "reason": "done"})
        answer = {"big_line": size, "big_lines": args.lines, "status": "success", "reason": "ok"}
        big = one_run(root, "big", answer)
    print(
        json.dumps(
            {
                "line_mb": size // 2**20,
                "lines": args.lines,
                "baseline": baseline,
                "big_line": big,
                "peak_ratio": round(big["peak_rss_mb"] / baseline["peak_rss_mb"], 2),
                "goal": {"peak_rss_mb": GOAL_PEAK_MB, "log_mb": GOAL_LOG_MB},
                "meets_goal": big["peak_rss_mb"] < GOAL_PEAK_MB and big["log_mb"] < GOAL_LOG_MB,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
