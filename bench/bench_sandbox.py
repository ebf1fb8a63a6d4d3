"""What the agent's sandbox costs each iteration at start-up; prints JSON.

The same trivial agent (`true`, then `node -e 0`, as an agent CLI is a node program) is run
bare and wrapped as worker wraps an agent's command (worker/sandbox/box.py: the policy of a
workspace, its settings file, its private tmp), in turn, round after round; the start-up cost
is the median wrapped time minus the median bare time, beside the ratio of the two (the median
of the pairwise ratios). Each runtime found is measured: the sandbox runtime (`srt`, the pinned
one in tests/realcli, or `--srt`) and bubblewrap.

Goal: <= 300 ms per iteration.

    python bench/bench_sandbox.py [--rounds 7] [--srt PATH]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import REPO, ROUNDS, child_env, environment_note, interleaved, summary

from worker.config import load_settings
from worker.sandbox.box import Runtime, Sandbox

GOAL_MS = 300.0
PINNED_SRT = REPO / "tests" / "realcli" / "node_modules" / ".bin" / "srt"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--srt", default=str(PINNED_SRT) if PINNED_SRT.exists() else "srt")
    args = parser.parse_args()
    rounds = max(ROUNDS, args.rounds)
    runtimes = [
        Runtime(name, path)
        for name, path in (("srt", shutil.which(args.srt)), ("bwrap", shutil.which("bwrap")))
        if path
    ]
    node = shutil.which("node")
    agents = {"true": [shutil.which("true") or "/bin/true"]}
    if node:
        agents["node"] = [node, "-e", "0"]
    out: dict[str, object] = {"goal_ms": GOAL_MS, "environment": environment_note()}
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        env = child_env({"XDG_STATE_HOME": str(Path(tmp) / "state"), "HOME": tmp})
        settings = load_settings(workspace, env=env)
        for runtime in runtimes:
            box = Sandbox(settings, "command", runtime)
            for agent, argv in agents.items():
                with box.launch(argv, workspace) as (wrapped, wrapped_env):
                    samples = interleaved(
                        {"bare": argv, "wrapped": wrapped},
                        {**wrapped_env, **env},
                        rounds=rounds,
                        cwd=workspace,
                    )
                bare, boxed = samples["bare"], samples["wrapped"]
                startup_ms = 1000 * (
                    statistics.median(s.wall_s for s in boxed)
                    - statistics.median(s.wall_s for s in bare)
                )
                out[f"{runtime.name}:{agent}"] = {
                    "bare": summary(bare),
                    "wrapped": summary(boxed, bare),
                    "startup_ms": round(startup_ms, 1),
                    "within_goal": startup_ms <= GOAL_MS,
                }
    if not runtimes:
        out["note"] = "no sandbox runtime here (srt or bwrap): nothing measured"
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
