"""Cost of the platform's process control (worker/process/platform/process.py); prints one JSON
object.

  start_s            start and reap `python -c pass` as a TreeProcess (own group; on Windows
                     suspended, put in a job, resumed)
  start_baseline_s   the same with a bare subprocess.Popen, measured in the same run
  end_tree_s         end a process and its 3 sleeping grandchildren with `end_tree` (ask, wait
                     for the group and the psutil tree, force), until all are gone
  end_baseline_s     the same tree ended by force at once (`end_tree(grace_s=0)`: SIGKILL to
                     the group, or the job terminated), measured in the same run
  orphan_check_s     `orphan_group` + `alive` on a live process (what each run pays per claim)

Times are medians of --repeat runs; the ratios are what compare across machines.

    python bench/bench_platform.py [--repeat 10]
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
from collections.abc import Callable
from pathlib import Path

import psutil

from worker.process.platform.process import TreeProcess, alive, orphan_group, start_time

TREE = """
import subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(3)]
with open(sys.argv[1], "w") as f:
    f.write(" ".join(str(k.pid) for k in kids))
time.sleep(600)
"""


def _median(action: Callable[[], float], repeat: int) -> float:
    return statistics.median(action() for _ in range(repeat))


def _start(cls: type[subprocess.Popen[bytes]]) -> float:
    began = time.perf_counter()
    proc = cls([sys.executable, "-c", "pass"])
    proc.wait()
    return time.perf_counter() - began


def _gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


def _end(graceful: bool, folder: Path) -> float:
    pid_file = folder / f"tree-{time.perf_counter_ns()}"
    proc: TreeProcess[bytes] = TreeProcess([sys.executable, "-c", TREE, str(pid_file)])
    while not (pid_file.exists() and pid_file.read_text()):
        time.sleep(0.01)
    pids = [proc.pid, *map(int, pid_file.read_text().split())]
    began = time.perf_counter()
    proc.end_tree(grace_s=3.0 if graceful else 0)
    proc.wait()
    while not _gone(pids):
        time.sleep(0.001)
    return time.perf_counter() - began


def _orphan_check() -> float:
    pid = os.getpid()
    started = start_time(pid) or ""
    began = time.perf_counter()
    assert orphan_group(pid, started) and alive(pid)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        result = {
            "start_s": _median(lambda: _start(TreeProcess), args.repeat),
            "start_baseline_s": _median(lambda: _start(subprocess.Popen), args.repeat),
            "end_tree_s": _median(lambda: _end(True, folder), args.repeat),
            "end_baseline_s": _median(lambda: _end(False, folder), args.repeat),
            "orphan_check_s": _median(_orphan_check, args.repeat),
        }
    result["start_ratio"] = result["start_s"] / result["start_baseline_s"]
    result["end_ratio"] = result["end_tree_s"] / result["end_baseline_s"]
    print(json.dumps({k: round(v, 6) for k, v in result.items()}, indent=2))


if __name__ == "__main__":
    main()
