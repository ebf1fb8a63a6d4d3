"""The live progress display: in a real pseudo-terminal (tmux) its clock ticks while the agent
is silent; off a terminal it prints timestamped lines; `--quiet` prints only the result."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from worker.cli.ui import LiveProgress
from worker.state.progress import Step

from .conftest import FakeAgent, run_worker, write_message

_CLOCK = re.compile(r"iteration 1/\d+\s+(\d+:\d\d) \(task (\d+:\d\d)\)")


pytestmark = pytest.mark.usefixtures("only_the_task")


def test_the_panel_clock_is_computed_when_drawn_not_when_an_event_comes() -> None:
    progress = LiveProgress()
    step = Step("msg-1", "Fix it", "code-simple", "haiku", 2, 5, 2, 0.5)
    step.started_at, step.step_started_at = 1000.0, 1030.0
    progress.step(step)
    first, later = progress.lines(now=1031.0), progress.lines(now=1095.0)
    assert first[1] == "code-simple (haiku) iteration 2/5  0:01 (task 0:31)"
    assert later[1] == "code-simple (haiku) iteration 2/5  1:05 (task 1:35)"
    assert first[3] == "tokens: 0 in, 0 out   cost: $0.5000"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_in_a_terminal_the_clock_ticks_while_the_agent_is_silent(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """Two captures of the same tmux pane while the agent prints nothing: the clock moved."""
    fake_claude.answers({"hang": 30, "status": "success", "reason": "done"})
    write_message(workspace, "msg-live", subject="A slow task")
    socket = f"worker-test-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, **fake_claude.env(), "TERM": "xterm-256color", "COLUMNS": "120"}
    command = " ".join(
        shlex.quote(part)
        for part in [sys.executable, "-m", "worker", "run", "--workspace", str(workspace)]
    )
    tmux = ["tmux", "-L", socket]
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", "120", "-y", "30", f"{command}; sleep 60"],
        env=env,
        check=True,
    )
    try:
        first = _wait_for_clock(tmux, previous=None)
        second = _wait_for_clock(tmux, previous=first[0])
        # Ctrl-C: the worker ends its agent (no orphan sleeps on) and prints its result.
        subprocess.run([*tmux, "send-keys", "C-c"], check=True)
        ended = _wait_for(tmux, lambda text: "STOP_REQUESTED" in text)
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)
    assert "msg-live: A slow task" in first[1] and "tool: -" in second[1]
    assert first[0] != second[0]  # the agent said nothing in between, yet the clock moved
    assert len(fake_claude.calls) == 1 and "stopped: msg-live" in ended


def _wait_for_clock(tmux: list[str], previous: str | None) -> tuple[str, str]:
    """Capture the pane until it shows the clock, different from `previous` if given."""
    screen = _wait_for(
        tmux, lambda text: (m := _CLOCK.search(text)) is not None and m.group(1) != previous
    )
    clock = _CLOCK.search(screen)
    assert clock is not None
    return clock.group(1), screen


def _wait_for(tmux: list[str], shows: Callable[[str], bool]) -> str:
    """Capture the pane until it shows what is expected. The deadline only keeps a broken
    display from hanging the suite; it measures nothing."""
    deadline = time.monotonic() + 60
    screen = ""
    while time.monotonic() < deadline:
        screen = subprocess.run(
            [*tmux, "capture-pane", "-p"], capture_output=True, text=True, check=False
        ).stdout
        if shows(screen):
            return screen
        time.sleep(0.2)
    raise AssertionError(f"the pane never showed what was expected:\n{screen}")


def test_off_a_terminal_progress_is_timestamped_lines(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    fake_claude.answers(
        {
            "status": "continue",
            "reason": "more",
            "tools": [{"name": "Bash", "input": {"command": "pytest -q"}}],
        },
        {"status": "success", "reason": "done"},
    )
    write_message(workspace, "msg-plain")
    proc = run_worker(workspace, "run")
    assert proc.returncode == 0, proc.stderr
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d "
    lines = proc.stdout.splitlines()
    assert re.fullmatch(stamp + r"msg-plain: code-simple \(haiku\) iteration 1/5 started", lines[0])
    # Each tool call and the STATUS block are lines of their own, before the iteration's end.
    assert re.fullmatch(stamp + r"msg-plain: tool Bash: pytest -q", lines[1])
    assert re.fullmatch(stamp + r"msg-plain: STATUS: continue - more", lines[2])
    assert re.fullmatch(
        stamp + r"msg-plain: code-simple \(haiku\) iteration 1/5: continue .*", lines[3]
    )
    assert lines[-1].startswith("reason codes: ")
    quiet = run_worker(workspace, "run", "--quiet")
    assert quiet.stdout.startswith("idle: nothing to do")


def test_reviewers_are_a_step_of_their_own_with_their_time_and_cost_apart(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes.reviewer_kit import knowledge_answer

    monkeypatch.delenv("WORKER_REVIEW__ENABLED")
    (workspace / "worker.toml").write_text(
        "[review.style]\nenabled = false\n[review.design]\nenabled = false\n"
        "[review.knowledge]\nenabled = true\ninterval = 1\n",
        encoding="utf-8",
    )
    task = {"status": "success", "reason": "done", "cost": 0.01}
    reviewer = {"text": knowledge_answer("the tests need a fake claude"), "cost": 0.02}
    fake_claude.answers(task, reviewer, task, reviewer)
    write_message(workspace, "msg-reviewed")
    proc = run_worker(workspace, "run", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert len(fake_claude.calls) == 2  # the task, then the knowledge reviewer
    assert report["cost_usd"] == 0.01 and report["reviewers"]["cost_usd"] == 0.02
    assert report["reviewers"]["duration_s"] > 0
    text = run_worker(workspace, "run", "--task-id", "msg-reviewed").stdout
    assert re.search(r"reviewers: 1 ran in \d+\.\ds, \$0\.0200", text)
    assert re.search(r"reviewers: \d+\.\ds, \$0\.0200 \(apart from the task's\)", text)
    assert len(fake_claude.task_calls) == 2 and "$0.0100" in text
