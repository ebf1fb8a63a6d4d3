"""Start-up cost of the commands cron and users run most; prints one JSON object.

`worker --help`, a dry run on an empty workspace and `worker status --json`, each as a ratio
to `python -c pass` on the same interpreter, measured in the same rounds (interleaved, medians
of at least 7 runs; see bench/timing.py). Goals: --help <= 3x, dry run <= 5x, status <= 5x.

In the same rounds, the floors of the libraries worker is built on (bench/timing.py):
`library_floor` imports Typer and pydantic's BaseModel and nothing else; `app_floor` is the
least Typer app validating one pydantic model, run with the dry run's options. Each command's
ratio to them is worker's own share; `goals_exceeded_by` names the goals a floor alone misses
(`--help` imports Typer only, so only the dry run and `status` are held to the floors).
Since no worker on these libraries can meet the 5x goals, worker's own share is held to a goal
of its own: the dry run and `status` at most 1.15x `app_floor` (`meets_own_share_goal`).

    python bench/bench_startup.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import (
    APP_FLOOR,
    LIBRARY_FLOOR,
    ROUNDS,
    Sample,
    child_env,
    environment_note,
    interleaved,
    ratio,
    summary,
    worker,
)

GOALS = {"help": 3.0, "dry_run": 5.0, "status": 5.0}
ON_PYDANTIC = ("dry_run", "status")  # `--help` imports Typer only
# Worker's own share, the part the libraries don't set: each command on pydantic against the
# least Typer app validating one model (the team's goal since the 5x goals proved to lie below
# that app; README, Benchmarks).
OWN_SHARE_GOALS = {"dry_run": 1.15, "status": 1.15}


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
        options = ["--dry-run", "--json", "--workspace", str(empty)]
        commands = {
            "python_c_pass": [sys.executable, "-c", "pass"],
            "library_floor": [sys.executable, "-c", LIBRARY_FLOOR],
            "app_floor": [sys.executable, "-c", APP_FLOOR, "run", *options],
            "help": worker("--help"),
            "dry_run": worker("run", *options),
            "status": worker("status", "--json", "--workspace", str(empty)),
        }
        samples = interleaved(commands, env, rounds)
    print(json.dumps(figures(samples), indent=2))


def figures(samples: dict[str, list[Sample]]) -> dict[str, object]:
    base, floors = samples["python_c_pass"], ("library_floor", "app_floor")
    out: dict[str, object] = {"environment": environment_note()}
    out["python_c_pass"] = summary(base)
    for floor in floors:
        out[floor] = summary(samples[floor], base)
    for name, goal in GOALS.items():
        row = summary(samples[name], base)
        for floor in floors:
            row[f"ratio_to_{floor}"] = ratio(samples[name], samples[floor])
        row["goal_ratio"] = goal
        row["meets_goal"] = float(row["ratio_wall"]) <= goal  # type: ignore[arg-type]
        if name in OWN_SHARE_GOALS:
            row["goal_ratio_to_app_floor"] = OWN_SHARE_GOALS[name]
            own_share = ratio(samples[name], samples["app_floor"])
            row["meets_own_share_goal"] = own_share <= OWN_SHARE_GOALS[name]
        out[name] = row
    out["goals_exceeded_by"] = {
        floor: [name for name in ON_PYDANTIC if ratio(samples[floor], base) > GOALS[name]]
        for floor in floors
    }
    return out


if __name__ == "__main__":
    main()
