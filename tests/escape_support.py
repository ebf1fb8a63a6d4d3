"""What the escape tests share (tests/test_escape_*.py): a stand-in agent (the `command` agent,
`sh -c`) that runs an attack inside the box of each runtime, bubblewrap alone and `srt`, and
writes what it got to a file in its tree, which the test reads outside the box.

The box empties /tmp, where pytest keeps every test's folder: an attack on a file there would
fail whatever the rule under test says. So the places attacked (the home, worker's state home)
live in a folder outside /tmp, under the real user's ~/.cache, removed after the test.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox_support import sandbox_runtime
from tests.test_sandbox import bwrap_works
from worker.config import load_settings
from worker.run.runner import RunOptions, run_once
from worker.state.run_log import run_detail

from .conftest import write_message

RUNTIMES = ["bwrap", "srt"]
REAL_HOME = Path.home()  # read before any test moves HOME
STATUS = "printf '=== AGENT STATUS ===\\nSTATUS: success\\nREASON: done\\n===================\\n'"
OUT = "attack-out.txt"


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder of the test's own that is not under /tmp (which the box empties)."""
    base = REAL_HOME / ".cache" / "worker-tests"
    base.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="escape-", dir=base))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def box_home(outside_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME and worker's state home outside /tmp; no reviewer, no fallback task."""
    home = outside_tmp / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(outside_tmp / "state"))
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    return home


def use_runtime(runtime: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The default box with `runtime`: bubblewrap alone (no srt found, `auto`) or srt
    (`required`, the pinned one); skip (fail in CI) where this machine cannot run it."""
    if runtime == "srt":
        monkeypatch.setenv("WORKER_SANDBOX__SRT_BIN", str(sandbox_runtime()))
        monkeypatch.setenv("WORKER_SANDBOX__MODE", "required")
    else:
        bwrap_works()
        monkeypatch.setenv("WORKER_SANDBOX__SRT_BIN", str(tmp_path / "no-srt"))
        monkeypatch.setenv("WORKER_SANDBOX__MODE", "auto")
    monkeypatch.setenv("WORKER_SANDBOX__UNTRUSTED_MODE", "auto")


def attack(workspace: Path, script: str, runtime: str | None) -> str:
    """Run `script` as the agent of one task (in the box of `runtime`; None: unboxed, the
    control); what it printed, read from its tree outside the box."""
    (workspace / "modes").mkdir(exist_ok=True)
    command = ["sh", "-c", f"( {script} ) > {OUT} 2>&1; {STATUS}"]
    mode = {"id": "plain", "model": "local", "maxIterations": 1, "agent": "command"}
    (workspace / "modes" / "modes.json").write_text(
        json.dumps({"modes": [{**mode, "command": command}]})
    )
    write_message(workspace, "msg-1")
    settings = load_settings(workspace)
    report = run_once(settings, RunOptions())
    assert report.outcome.value == "success", report.reason
    (iteration,) = run_detail(settings, report.run_id)["iterations"]
    assert iteration["sandbox"] == runtime  # the attack ran in the box asked for
    return (workspace / OUT).read_text()
