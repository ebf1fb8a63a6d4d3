"""Benchmark how fast worker gives up on broken infrastructure, with the real Claude Code.

The pinned CLI (tests/realcli) talks to the scripted Messages API of tests/fakes/anthropic_api.py
on 127.0.0.1, answering 401 (bad key) or 529 (overloaded) to every call. For each, prints the
seconds from the first `api_retry` event worker read to its decision to end the agent, and to
the end of the run (task released, or waiting); then a run whose agent program is missing
(refused before any claim). The baseline, measured in the same run, is one successful task
(the CLI's start and one answer). Left alone, the CLI retries 10 times over about 3 minutes.

    python bench/bench_infra.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.anthropic_api import AnthropicAPI, Reply, failure, text  # noqa: E402
from worker.agents.claude import StreamCollector  # noqa: E402
from worker.config import load_settings  # noqa: E402
from worker.errors import ConfigError  # noqa: E402
from worker.run.runner import RunOptions, run_once  # noqa: E402

CLAUDE = ROOT / "tests" / "realcli" / "node_modules" / ".bin" / "claude"
SUCCESS = "done\n=== AGENT STATUS ===\nSTATUS: success\nREASON: done\n===================\n"


def instrument(marks: dict[str, float]) -> Callable[[], None]:
    """Time the first api_retry line worker reads and its decision to end the agent."""
    original = StreamCollector.watch

    def timed(self: StreamCollector, line: str) -> None:
        if '"api_retry"' in line:
            marks.setdefault("first_retry", time.monotonic())
        original(self, line)
        if self.halt:
            marks.setdefault("halt", time.monotonic())

    StreamCollector.watch = timed  # type: ignore[method-assign]

    def undo() -> None:
        StreamCollector.watch = original  # type: ignore[method-assign]

    return undo


def one_run(answer: Reply, claude: Path = CLAUDE) -> dict[str, Any]:
    api = AnthropicAPI().start()
    api.always(answer)
    marks: dict[str, float] = {}
    undo = instrument(marks)
    saved = dict(os.environ)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ws = Path(tmp) / "ws"
            (ws / "inbox").mkdir(parents=True)
            (Path(tmp) / "home").mkdir()
            message = {
                "id": "msg-1",
                "from": "alice",
                "to": "bench",
                "subject": "do it",
                "body": "Please do the thing.",
                "status": "unread",
                "priority": "normal",
                "created_at": "2026-11-20T10:00:00Z",
            }
            (ws / "inbox" / "msg-1.json").write_text(json.dumps(message))
            os.environ.update(api.env(str(Path(tmp) / "home")))
            os.environ.update(
                {
                    "WORKER_CLAUDE_BIN": str(claude),
                    "WORKER_MACHINE_ID": "bench",
                    "WORKER_REVIEW__ENABLED": "false",
                }
            )
            started = time.monotonic()
            try:
                report = run_once(load_settings(ws), RunOptions())
                outcome, code, count = report.outcome.value, report.exit_code, report.iterations
            except ConfigError as exc:
                outcome, code, count = "config_error", exc.exit_code, 0
            ended = time.monotonic()
    finally:
        os.environ.clear()
        os.environ.update(saved)
        undo()
        api.stop()
    first = marks.get("first_retry")
    return {
        "outcome": outcome,
        "exit_code": int(code),
        "iterations": count,
        "api_calls": len(api.conversation_requests()),
        "run_s": ended - started,
        "retry_to_decision_s": marks["halt"] - first if first and "halt" in marks else None,
        "retry_to_run_end_s": ended - first if first else None,
    }


def median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [run[key] for run in runs if run[key] is not None]
    return round(statistics.median(values), 3) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not CLAUDE.exists():
        sys.exit(f"{CLAUDE} is missing: npm ci --prefix tests/realcli --no-audit --no-fund")
    cases: dict[str, Reply] = {"baseline_success": text(SUCCESS)}
    cases |= {"http_401": failure(401), "http_529": failure(529)}
    out: dict[str, Any] = {"claude": str(CLAUDE), "repeat": args.repeat}
    missing = ROOT / "no-such-claude"
    for name, answer in [*cases.items(), ("missing_binary", text(SUCCESS))]:
        claude = missing if name == "missing_binary" else CLAUDE
        runs = [one_run(answer, claude) for _ in range(args.repeat)]
        out[name] = {
            "outcome": runs[-1]["outcome"],
            "exit_code": runs[-1]["exit_code"],
            "iterations": runs[-1]["iterations"],
            "api_calls": runs[-1]["api_calls"],
            "run_s": median(runs, "run_s"),
            "retry_to_decision_s": median(runs, "retry_to_decision_s"),
            "retry_to_run_end_s": median(runs, "retry_to_run_end_s"),
        }
    base = out["baseline_success"]["run_s"]
    for name in ("http_401", "http_529", "missing_binary"):
        out[name]["run_vs_baseline"] = round(out[name]["run_s"] / base, 2) if base else None
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
