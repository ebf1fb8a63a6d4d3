#!/usr/bin/env python3
"""A stand-in agent for the slot tests and the parallel bench: the fake `claude`, which records
its start and its end (pid, working folder) in SLOT_AGENT_LOG, a file outside the tree.

It works out its task from its working folder (a worktree is named after its task): with
SLOT_AGENT_SCRIPTS set, the fake's script is `<SLOT_AGENT_SCRIPTS>/<folder>.json` when that
file exists (its own answers per task; the calls counted per task too). With SLOT_AGENT_GATE
set, it waits until the file `<SLOT_AGENT_GATE>/go` or `<SLOT_AGENT_GATE>/<folder>` exists
before it answers, so that a test decides when the agents of its slots end.
"""

import io
import json
import os
import runpy
import signal
import sys
import time

FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_claude.py")


def note(event: str, task: str) -> None:
    line = json.dumps({"event": event, "pid": os.getpid(), "task": task, "at": time.time()})
    with open(os.environ["SLOT_AGENT_LOG"], "a", encoding="utf-8") as handle:
        handle.write(line + "\n")  # one short append: whole lines, in order, across processes


def gate(task: str) -> None:
    folder = os.environ.get("SLOT_AGENT_GATE")
    while folder and not any(os.path.exists(os.path.join(folder, name)) for name in ("go", task)):
        time.sleep(0.02)


def main() -> int:
    task = os.path.basename(os.getcwd())
    scripts = os.environ.get("SLOT_AGENT_SCRIPTS")
    own = os.path.join(scripts, f"{task}.json") if scripts else ""
    if own and os.path.exists(own):
        os.environ["FAKE_CLAUDE_SCRIPT"] = own
        os.environ["FAKE_CLAUDE_LOG"] = os.path.join(scripts, f"{task}.calls.jsonl")
    stdin = sys.stdin.read()
    # Ended by worker (a stop): the end is recorded too, as the process goes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    note("start", task)
    try:
        gate(task)
        sys.stdin = io.StringIO(stdin)
        namespace = runpy.run_path(FAKE, run_name="fake_claude")
        return int(namespace["main"]())
    finally:
        note("end", task)


if __name__ == "__main__":
    sys.exit(main())
