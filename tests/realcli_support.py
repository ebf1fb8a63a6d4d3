"""What the tests that drive the real agent CLIs (tests/realcli/, from npm) share: finding the
CLI (or skipping, with the reason, when node or the CLI is not installed), a workspace whose only
mode runs it, the STATUS block a scripted model answers with, and the processes left behind.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import psutil
import pytest

REALCLI_BIN = Path(__file__).parent / "realcli" / "node_modules" / ".bin"


def real_cli(name: str, *, module: bool = False) -> Path:
    """The pinned CLI; the test (`module`: the whole module) is skipped, saying why, when node
    or the CLI is missing, and fails instead in CI (`CI` or `REALCLI_REQUIRED` set, as
    `.ci/run` does)."""
    path = REALCLI_BIN / name
    problem = None
    if shutil.which("node") is None:
        problem = "node is not installed: the real-CLI tests need node and npm"
    elif not path.exists():
        problem = f"{path} is missing: run `npm ci --prefix tests/realcli --no-audit --no-fund`"
    if problem and (os.environ.get("CI") or os.environ.get("REALCLI_REQUIRED")):
        pytest.fail(problem)
    if problem:
        pytest.skip(problem, allow_module_level=module)
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


def processes_with_env(name: str, value: str) -> list[int]:
    """Live processes whose environment has `name=value` (an agent CLI left behind, pointed
    at a test's API); psutil reads them on Linux, macOS and Windows alike."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() != psutil.STATUS_ZOMBIE and process.environ().get(name) == value:
                found.append(process.pid)
        except psutil.Error:
            continue
    return found
