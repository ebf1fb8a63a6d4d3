"""Plain progress as it happens: off a terminal (cron, systemd) each tool call, STATUS block and
supervisor finding is a timestamped line when it happens, and `worker log -f` stamps each with
its own time. The stand-in `claude` prints real stream-json and waits at a gate before each
event, so the test, not a clock, decides when each event comes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest

from worker.models import AgentEvent, EventKind, Task
from worker.state.progress import Step, Tracker, events_after
from worker.state.store import Store

from .conftest import FakeAgent, write_message

pytestmark = pytest.mark.usefixtures("only_the_task")

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) ")


@contextmanager
def _worker(ws: Path, *argv: str) -> Iterator[subprocess.Popen[str]]:
    """`worker ARGV` with its stdout a pipe (no terminal), ended with SIGTERM afterwards."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker", *argv, "--workspace", str(ws)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ),
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _line(stream: IO[str] | None) -> str:
    assert stream is not None
    line = stream.readline()
    assert line, "the output ended early"
    return line.rstrip("\n")


def _next_second() -> None:
    """Let the wall clock's second change, so that the next event's stamp differs (the
    stamps have a one-second resolution); this waits, it asserts nothing about time."""
    second = int(time.time())
    while int(time.time()) == second:
        time.sleep(0.02)


def _stamps(lines: list[str]) -> list[str]:
    found = [_STAMP.match(line) for line in lines]
    assert all(found), lines
    return [m.group(1) for m in found if m]


def test_off_a_terminal_each_event_is_a_line_when_it_happens_with_its_own_time(
    workspace: Path, fake_claude: FakeAgent, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    fake_claude.answers(
        {
            "gate": str(gate),
            "tools": [
                {"name": "Bash", "input": {"command": "pytest -q"}},
                {"name": "Read", "input": {"file_path": "notes.md"}},
            ],
            "status": "success",
            "reason": "notes read",
        }
    )
    write_message(workspace, "msg-live", subject="Read the notes")
    expected = ["iteration 1/5 started", "tool Bash: pytest -q", "tool Read: notes.md"]
    expected.append("STATUS: success - notes read")
    try:
        with _worker(workspace, "log", "-f") as follower, _worker(workspace, "run") as run:
            seen = []
            for step, want in enumerate(expected):
                seen.append(_line(run.stdout))
                # The agent waits at its gate: this line came before the iteration could end.
                assert want in seen[-1] and "msg-live: " in seen[-1], seen
                if step >= 1:
                    _next_second()
                    (gate / f"go-{step}").touch()  # the agent's next event may come now
            assert run.wait() == 0
            ended = _line(run.stdout)
            assert re.search(r"iteration 1/5: success \(", ended)
            followed = []
            while "success (" not in (followed[-1] if followed else ""):
                followed.append(_line(follower.stdout))
    finally:
        for step in range(1, 4):
            (gate / f"go-{step}").touch()  # a stray agent never waits forever
    stamps = _stamps(seen[1:])
    assert stamps == sorted(stamps) and len(set(stamps)) == 3  # each event its own second
    events = [line for line in followed if re.search(r"run \d+ msg-live: (tool|STATUS)", line)]
    assert [e.split(": ", 1)[1] for e in events] == [w for w in expected[1:]]
    followed_stamps = _stamps(events)
    assert followed_stamps == stamps  # the moment each happened, not the iteration's end


class _Shown:
    """A display that keeps what it is told to say."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def step(self, step: Step) -> None: ...
    def changed(self, step: Step) -> None: ...
    def phase(self, name: str) -> None: ...
    def phase_end(self, text: str | None) -> None: ...
    def start(self, text: str) -> None: ...
    def update(self, text: str) -> None: ...
    def stop(self, text: str) -> None: ...

    def said(self, step: Step, text: str) -> None:
        self.lines.append(text)


def test_the_journal_keeps_a_status_once_a_finding_once_and_no_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude repeats its STATUS block in its result: one line. A supervisor's stop reason
    comes with every later event: one line. A token in a tool's argument is hidden."""
    monkeypatch.setenv("WORKER_GITHUB_TOKEN", "ghp_" + "a1" * 18)
    block = "=== AGENT STATUS ===\nSTATUS: continue\nREASON: half\n==================="
    shown = _Shown()
    with Store(tmp_path / "db.sqlite") as store:
        tracker = Tracker(store, 7, Task(id="msg-1", source="inbox", title="t"), shown)
        tracker.step("code-simple", "haiku", 1, 5, 1, 0.0)
        command = f"curl -H 'token {os.environ['WORKER_GITHUB_TOKEN']}' x"
        tracker.event(AgentEvent(EventKind.TOOL_CALL, 1, tool="Bash", args={"command": command}))
        tracker.event(AgentEvent(EventKind.TEXT, 2, text="done\n" + block))
        tracker.event(AgentEvent(EventKind.RESULT, 3, text=block))
        tracker.finding(f"stopped: {command} 4 times")
        tracker.finding(f"stopped: {command} 4 times")
        tracker.stop(f"iteration 1/5: the agent failed: {command}")
        journal = [row["text"] for row in events_after(store, 0)]
    hidden = "curl -H 'token ***' x"
    assert shown.lines == [f"tool Bash: {hidden}", "STATUS: continue - half"]
    assert journal == [
        "code-simple (haiku) iteration 1/5 started",
        *shown.lines,
        f"supervisor: stopped: {hidden} 4 times",
        f"iteration 1/5: the agent failed: {hidden}",
    ]


def test_a_supervisor_stop_is_a_line_before_the_iteration_ends(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """The agent calls the same failing tool again and again: the supervisor stops it mid
    iteration, and says so when it does, not only after the iteration."""
    same = {"name": "Bash", "input": {"command": "ls"}, "error": "boom"}
    fake_claude.answers({"status": "continue", "reason": "more", "tools": [same] * 12})
    write_message(workspace, "msg-loop")
    with _worker(workspace, "run") as run:
        assert run.stdout is not None
        lines = run.stdout.read().splitlines()
    stop = next(i for i, line in enumerate(lines) if "supervisor emergency: Loop" in line)
    ended = next(i for i, line in enumerate(lines) if "iteration 1/5: continue" in line)
    assert stop < ended and "msg-loop: tool Bash: ls" in lines[stop - 1]
    assert _STAMP.match(lines[stop]) and "supervisor: supervisor" not in lines[stop]


def test_the_journal_is_pruned_with_the_runs(workspace: Path) -> None:
    """`worker prune` (and the daily prune after a run) deletes journal lines past the runs'
    retention, and keeps the others."""
    from worker.config import load_settings
    from worker.state.retention import prune

    settings = load_settings(workspace)
    with Store(settings.db_path) as store:
        tracker = Tracker(store, 1, Task(id="msg-1", source="inbox", title="t"))
        tracker.step("code-simple", "haiku", 1, 5, 1, 0.0)
        tracker.step("code-simple", "haiku", 2, 5, 2, 0.0)
        old = time.time() - (settings.retention.runs_days + 1) * 86400
        store.db.execute("UPDATE run_events SET at = ? WHERE id = 1", (old,))
        store.db.commit()
        prune(settings, store, dry_run=True)
        assert len(events_after(store, 0)) == 2  # a dry run deletes nothing
        prune(settings, store)
        assert [e["text"] for e in events_after(store, 0)] == [
            "code-simple (haiku) iteration 2/5 started"
        ]
