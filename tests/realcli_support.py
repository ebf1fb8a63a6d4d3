"""What the tests that drive the real agent CLIs (tests/realcli/, from npm) share: finding the
CLI (or skipping, with the reason, when node or the CLI is not installed), a workspace whose only
mode runs it, the STATUS block a scripted model answers with, and a look at the processes left.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

REALCLI_BIN = Path(__file__).parent / "realcli" / "node_modules" / ".bin"


def real_cli(name: str) -> Path:
    """The pinned CLI; the test is skipped, saying why, when node or the CLI is missing, and
    fails instead in CI (`CI` or `REALCLI_REQUIRED` set, as `.ci/run` does)."""
    path = REALCLI_BIN / name
    problem = None
    if shutil.which("node") is None:
        problem = "node is not installed: the real-CLI tests need node and npm"
    elif not path.exists():
        problem = f"{path} is missing: run `npm ci --prefix tests/realcli --no-audit --no-fund`"
    if problem and (os.environ.get("CI") or os.environ.get("REALCLI_REQUIRED")):
        pytest.fail(problem)
    if problem:
        pytest.skip(problem)
    return path


def status_text(status: str, reason: str, text: str = "Worked on it.", **fields: str) -> str:
    """An agent's answer ending with worker's STATUS block (`wait_for="..."` adds WAIT_FOR)."""
    extra = [f"{name.upper()}: {value}" for name, value in fields.items()]
    block = ["=== AGENT STATUS ===", f"STATUS: {status}", f"REASON: {reason}", *extra, "=" * 19]
    return f"{text}\n\n" + "\n".join(block)


def one_mode_workspace(workspace: Path, agent: str, **mode: Any) -> dict[str, Any]:
    """The workspace's only mode runs `agent`; reviewers are off (they would call the API)."""
    spec = {"id": f"{agent}-mode", "model": mode.pop("model"), "maxIterations": 3, "agent": agent}
    spec.update(mode)
    (workspace / "modes").mkdir(exist_ok=True)
    (workspace / "modes" / "modes.json").write_text(json.dumps({"modes": [spec]}))
    return spec


def live_in_group(pgid: int) -> list[int]:
    """Processes of the group that still run (zombies waiting for a parent do not count)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive
