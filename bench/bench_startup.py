"""Start-up cost of the commands cron and users run most; prints one JSON object.

`worker --help`, a dry run on an empty workspace and `worker status --json`, each as a ratio
to `python -c pass` on the same interpreter, measured in the same rounds (interleaved, medians
of at least 7 runs; see bench/timing.py). Goals: --help <= 3x, dry run <= 5x, status <= 5x.

    python bench/bench_startup.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import ROUNDS, child_env, environment_note, interleaved, summary, worker

GOALS = {"help": 3.0, "dry_run": 5.0, "status": 5.0}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    rounds = max(ROUNDS, parser.parse_args().rounds)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        empty = root / "empty"
        empty.mkdir()
        env = child_env(
            {
                "XDG_STATE_HOME": str(root / "state"),  # not the user's state folders
                "WORKER_MACHINE_ID": "bench",
                "TERM": "dumb",
            }
        )
        commands = {
            "python_c_pass": [sys.executable, "-c", "pass"],
            "help": worker("--help"),
            "dry_run": worker("run", "--dry-run", "--json", "--workspace", str(empty)),
            "status": worker("status", "--json", "--workspace", str(empty)),
        }
        samples = interleaved(commands, env, rounds)
    base = samples["python_c_pass"]
    out: dict[str, object] = {"environment": environment_note()}
    out["python_c_pass"] = summary(base)
    for name, goal in GOALS.items():
        figures = summary(samples[name], base)
        figures["goal_ratio"] = goal
        figures["meets_goal"] = float(figures["ratio_wall"]) <= goal  # type: ignore[arg-type]
        out[name] = figures
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
