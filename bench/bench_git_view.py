"""What git as data costs: worker's `git status` through its view of the repository (a private
`GIT_DIR` made and removed per call, `worker.process.gitview`) against the same `git status`
run the plain way on the same repository, both through the process chokepoint; prints JSON.

The repository holds 2,000 files with one changed. The two measurements alternate within each
round; each is the median of its calls over the rounds (at least 7 rounds of 10 calls).

Goal: <= 15 ms more per call (the progress check runs once per iteration).

    python bench/bench_git_view.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import REPO, ROUNDS, environment_note

sys.path.insert(0, str(REPO))

from worker.process.gitview import git_argv, main_checkout, run_git
from worker.process.proc import run_process

GOAL_MS = 15.0
STATUS = ("status", "--porcelain=v2", "--branch", "--untracked-files=all")


def _repository(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=ws, check=True)
    for n in range(2000):
        (ws / f"f{n}.txt").write_text(f"{n}\n")
    subprocess.run(["git", "add", "-A"], cwd=ws, check=True)
    identity = ["-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run(["git", *identity, "commit", "-qm", "files"], cwd=ws, check=True)
    (ws / "f1.txt").write_text("changed\n")
    return ws


def _ms(call: Callable[[], object], times: int = 10) -> float:
    started = time.perf_counter()
    for _ in range(times):
        call()
    return (time.perf_counter() - started) / times * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    rounds = max(ROUNDS, parser.parse_args().rounds)
    with tempfile.TemporaryDirectory() as tmp:
        ws = _repository(Path(tmp))
        checkout = main_checkout(ws)
        assert checkout is not None

        def plain() -> object:
            return run_process(git_argv(*STATUS), cwd=ws, timeout_s=30)

        def through_view() -> object:
            return run_git(checkout, *STATUS, "--ignore-submodules=all", timeout_s=30)

        baseline, viewed = [], []
        for _ in range(rounds):
            baseline.append(_ms(plain))
            viewed.append(_ms(through_view))
    base, view = statistics.median(baseline), statistics.median(viewed)
    print(
        json.dumps(
            {
                "bench": "git_view",
                "plain_status_ms": round(base, 2),
                "view_status_ms": round(view, 2),
                "extra_ms": round(view - base, 2),
                "ratio": round(view / base, 3),
                "goal_extra_ms": GOAL_MS,
                "ok": view - base <= GOAL_MS,
                "rounds": rounds,
                "environment": environment_note(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
