"""API cost of the GitHub source against the local fake server; prints JSON.

  idle_first      the first idle run of a fresh workspace (ETags not known yet)
  idle_unchanged  the next idle run: nothing changed, every answer a 304
  task_run        one issue claimed, worked (a fake `claude`), reported, end to end
Goal (issue 3): an idle run costs at most one rate-limited request per configured repository,
and none when nothing changed.

    python bench/bench_github.py [--repos N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.github_server import FakeGitHub, settings_for  # noqa: E402


def measure(server: FakeGitHub, run: Any) -> dict[str, int]:
    before, costed = len(server.log), server.costed
    run()
    return {"requests": len(server.log) - before, "rate_limited": server.costed - costed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=3)
    args = parser.parse_args()
    from worker.config import load_settings
    from worker.run.runner import RunOptions, run_once

    repos = [f"acme/repo{i}" for i in range(args.repos)]
    server = FakeGitHub().start()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        bin_dir = Path(tmp) / "bin"
        bin_dir.mkdir()
        claude = bin_dir / "claude"
        claude.write_text(
            f'#!/bin/sh\nexec {sys.executable} {ROOT / "tests" / "fakes" / "fake_claude.py"} "$@"\n'
        )
        claude.chmod(0o755)
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps({"answers": [{"status": "success", "reason": "done"}]}))
        os.environ.update(
            {
                "GITHUB_TOKEN": "test-token-abc",
                "WORKER_MACHINE_ID": "bench",
                "WORKER_CLAUDE_BIN": str(claude),
                "FAKE_CLAUDE_SCRIPT": str(script),
            }
        )
        for repo in repos:
            server.add_repo(repo, {"maintainer": "write"})
            server.add_issue(repo, 1, labels=("bug",))  # not a task
        section = settings_for(server, repos=repos)
        overrides = {"github": section, "fallback": {"enabled": False}}

        def run(**options: Any) -> Any:
            return run_once(load_settings(ws, **overrides), RunOptions(**options))

        results = {
            "repos": len(repos),
            "idle_first": measure(server, run),
            "idle_unchanged": measure(server, run),
        }
        server.add_issue(repos[0], 2, body="Agent: Claude Code", labels=("roo-schedulable",))
        outcome: dict[str, Any] = {}
        results["task_run"] = measure(server, lambda: outcome.update(report=run().to_json()))
        results["task_run"]["outcome"] = outcome["report"]["outcome"]
        results["idle_after_task"] = measure(server, run)
    server.stop()
    idle = results["idle_unchanged"]["rate_limited"]
    results["goal_met"] = results["idle_first"]["rate_limited"] <= len(repos) and idle == 0
    print(json.dumps(results, indent=2))
    return 0 if results["goal_met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
