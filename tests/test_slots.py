"""`max_parallel`: several tasks at once in one workspace, each in a slot of its own.

The runs are real `worker run` processes (as cron starts them, overlapping) on a real git
repository, the agent a stand-in (tests/fakes/slot_agent.py) that records its start and end
with its pid in a file outside the tree and waits at a gate the test opens, so that each test
decides when the agents end, never how long anything takes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from tests.conftest import git, needs_posix, run_worker, write_message
from tests.test_core_cli import _wait_for
from worker.config import load_settings
from worker.state.store import Store
from worker.web.live import read_running
from worker.web.views import machines

pytestmark = [pytest.mark.usefixtures("only_the_task"), needs_posix("flock, process groups")]

SLOT_AGENT = Path(__file__).parent / "fakes" / "slot_agent.py"


@dataclass
class Slots:
    ws: Path
    log: Path
    gate: Path
    scripts: Path
    procs: list[subprocess.Popen[str]]

    def events(self) -> list[dict[str, object]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def starts(self) -> Counter[str]:
        return Counter(str(e["task"]) for e in self.events() if e["event"] == "start")

    def alive(self) -> list[str]:
        """The tasks whose agent started and has not ended."""
        running: dict[object, str] = {}
        for event in self.events():
            if event["event"] == "start":
                running[event["pid"]] = str(event["task"])
            else:
                running.pop(event["pid"], None)
        return sorted(running.values())

    def most_alive(self) -> int:
        """The most agents alive at once, from the log's order (appends are ordered)."""
        alive = most = 0
        for event in self.events():
            alive += 1 if event["event"] == "start" else -1
            most = max(most, alive)
        return most

    def open_gate(self) -> None:
        (self.gate / "go").touch()

    def close_gate(self) -> None:
        (self.gate / "go").unlink(missing_ok=True)

    def answers(self, task: str, *answers: dict[str, object]) -> None:
        (self.scripts / f"{task}.json").write_text(json.dumps({"answers": list(answers)}))

    def start(self, *args: str, stderr: IO[str] | int = subprocess.PIPE) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker", "run", "--json", "--workspace", str(self.ws), *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def clean_up(self) -> None:
        """After a test, passed or not: no run and no agent left behind."""
        self.open_gate()
        for proc in self.procs:
            if proc.returncode is not None:
                continue  # the test waited for it
            if proc.poll() is None:
                proc.kill()
            proc.communicate()

    def successes(self) -> Counter[str]:
        with Store(load_settings(self.ws).db_path) as store:
            rows = store.db.execute("SELECT task_id FROM runs WHERE outcome = 'success'")
            return Counter(str(row[0]) for row in rows)


@pytest.fixture
def slots(workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Slots]:
    """A git workspace with max_parallel = 3, the stand-in agent as `claude`."""
    git(workspace, "init", "-q", "-b", "main")
    (workspace / ".gitignore").write_text("inbox/\nwait_states/\n")
    git(workspace, "add", "-A")
    git(workspace, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    bin_dir, gate, scripts = tmp_path / "bin", tmp_path / "gate", tmp_path / "scripts"
    for folder in (bin_dir, gate, scripts):
        folder.mkdir()
    agent = bin_dir / "claude"
    agent.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{SLOT_AGENT}" "$@"\n')
    agent.chmod(0o755)
    default = tmp_path / "answers.json"
    default.write_text(json.dumps({"answers": [{"status": "success", "reason": "done"}]}))
    log = tmp_path / "agents.jsonl"
    for key, value in {
        "WORKER_CLAUDE_BIN": str(agent),
        "FAKE_CLAUDE_SCRIPT": str(default),
        "FAKE_CLAUDE_LOG": str(tmp_path / "calls.jsonl"),
        "SLOT_AGENT_LOG": str(log),
        "SLOT_AGENT_GATE": str(gate),
        "SLOT_AGENT_SCRIPTS": str(scripts),
        "WORKER_MAX_PARALLEL": "3",
    }.items():
        monkeypatch.setenv(key, value)
    kit = Slots(workspace, log, gate, scripts, [])
    yield kit
    kit.clean_up()


def _queue(ws: Path, count: int) -> list[str]:
    ids = [f"msg-{n}" for n in range(count)]
    for n, msg_id in enumerate(ids):
        write_message(ws, msg_id, created_at=f"2026-11-20T10:00:{n:02d}Z")
    return ids


def _finish(procs: list[subprocess.Popen[str]]) -> list[int]:
    for proc in procs:
        proc.communicate()
    return [proc.returncode for proc in procs]


def test_twelve_overlapping_runs_on_six_tasks_never_run_more_agents_than_slots(
    slots: Slots,
) -> None:
    """Twelve `worker run`s started together, twice, on six tasks with three slots: three take
    a task each and run side by side (each in its own worktree, all shown by `status`), the
    other nine exit 75; no task runs twice, none is lost, each ends on its own branch."""
    ids = _queue(slots.ws, 6)
    for _wave in range(2):
        procs = [slots.start("--use-worktree") for _ in range(12)]
        _wait_for(
            lambda procs=procs: (
                len(slots.alive()) == 3 and sum(p.poll() is not None for p in procs) == 9
            ),
            "three agents running, nine runs ended",
        )
        ended = [p for p in procs if p.poll() is not None]
        assert sorted(p.returncode for p in ended) == [75] * 9, [
            p.communicate()[1][-2000:] for p in ended if p.returncode != 75
        ]
        _seen_together(slots)
        slots.open_gate()
        assert sorted(_finish(procs)) == [0] * 3 + [75] * 9
        slots.close_gate()
    idle = json.loads(run_worker(slots.ws, "run", "--json", "--use-worktree").stdout)
    assert idle["outcome"] == "idle"
    assert slots.most_alive() == 3
    assert slots.starts() == Counter({msg_id: 1 for msg_id in ids})
    assert slots.successes() == Counter({msg_id: 1 for msg_id in ids})
    branches = git(slots.ws, "branch", "--list", "worker/*").split()
    assert sorted(branches) == sorted(f"worker/{msg_id}" for msg_id in ids)


def _seen_together(slots: Slots) -> None:
    """`status --json`, the dashboard's now and its machines view show every slot's task."""
    status = json.loads(run_worker(slots.ws, "status", "--json").stdout)
    assert sorted(str(run["task_id"]) for run in status["running"]) == slots.alive()
    assert all(run["iteration"] == 1 for run in status["running"])
    text = run_worker(slots.ws, "status").stdout
    assert "slots: 3 of 3 running a task" in text
    assert all(f"running: {task}" in text for task in slots.alive())
    settings = load_settings(slots.ws)
    now = read_running(settings)
    assert sorted(str(run["task_id"]) for run in now) == slots.alive()
    here = next(m for m in machines(settings, now) if m["machine"] == settings.machine_id)
    assert sorted(here["task"].split(", ")) == slots.alive()


def test_a_daily_cap_that_allows_three_tasks_starts_no_task_past_it(
    slots: Slots, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each task may cost $1 (its cap) and does; the day's cap is $3. With four slots free,
    three tasks start side by side; the fourth run starts nothing (DAILY_CAP_HELD: the three
    running at their caps would pass the cap), and neither does a run after they end."""
    monkeypatch.setenv("WORKER_MAX_PARALLEL", "4")
    monkeypatch.setenv("WORKER_TASK_COST_CAP_USD", "1.0")
    monkeypatch.setenv("WORKER_DAILY_COST_CAP_USD", "3.0")
    for msg_id in _queue(slots.ws, 5):
        slots.answers(msg_id, {"status": "success", "reason": "done", "cost": 1.0})
    procs = [slots.start("--use-worktree") for _ in range(3)]
    _wait_for(lambda: len(slots.alive()) == 3, "three agents running")
    fourth = run_worker(slots.ws, "run", "--json", "--use-worktree")
    assert fourth.returncode == 0, fourth.stderr
    held = json.loads(fourth.stdout)
    assert held["outcome"] == "idle" and "DAILY_CAP_HELD" in held["reason_codes"]
    slots.open_gate()
    assert _finish(procs) == [0, 0, 0]
    after = json.loads(run_worker(slots.ws, "run", "--json", "--use-worktree").stdout)
    assert after["outcome"] == "idle" and "DAILY_CAP_HELD" in after["reason_codes"]
    assert sum(slots.starts().values()) == 3
    with Store(load_settings(slots.ws).db_path) as store:
        spent = store.db.execute("SELECT SUM(cost_usd) FROM iterations").fetchone()[0]
    assert spent == pytest.approx(3.0)


def test_a_killed_slots_task_is_finished_later_once(slots: Slots) -> None:
    """Two slots run two tasks; one slot's `worker run` is killed (SIGKILL, no cleanup). The
    other slot goes on; the next run takes the free slot, ends the dead run's agent and runs
    its task again, which then succeeds once; the task nobody killed ran once."""
    _queue(slots.ws, 2)
    procs = [slots.start("--use-worktree") for _ in range(2)]
    _wait_for(lambda: len(slots.alive()) == 2, "two agents running")
    pid_of = {str(e["task"]): int(str(e["pid"])) for e in slots.events()}
    with Store(load_settings(slots.ws).db_path) as store:
        row = store.db.execute("SELECT pid FROM claims WHERE task_id = 'msg-0'").fetchone()
    victim = next(p for p in procs if p.pid == row[0])
    os.kill(victim.pid, signal.SIGKILL)
    victim.communicate()
    recovery = slots.start("--use-worktree")
    _wait_for(lambda: slots.starts()["msg-0"] == 2, "msg-0 started again")
    assert not _alive(pid_of["msg-0"])  # the dead run's agent was ended first
    slots.open_gate()
    survivor = next(p for p in procs if p is not victim)
    assert _finish([survivor, recovery]) == [0, 0]
    assert slots.successes() == Counter({"msg-0": 1, "msg-1": 1})
    assert slots.starts() == Counter({"msg-0": 2, "msg-1": 1})
    with Store(load_settings(slots.ws).db_path) as store:
        outcomes = [r[0] for r in store.db.execute("SELECT outcome FROM runs ORDER BY id")]
    assert outcomes.count("died") == 1
    idle = json.loads(run_worker(slots.ws, "run", "--json", "--use-worktree").stdout)
    assert idle["outcome"] == "idle"


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_task_that_edits_in_place_waits_for_the_other_slots_and_runs_alone(
    slots: Slots, tmp_path: Path
) -> None:
    """A worktree task runs in one slot; a run whose task edits the workspace in place waits
    for it to end before its agent starts (IN_PLACE_WAITED), and while it runs no other run
    takes a slot (exit 75)."""
    _queue(slots.ws, 2)
    first = slots.start("--use-worktree")
    _wait_for(lambda: slots.alive() == ["msg-0"], "the worktree task running")
    said = tmp_path / "in-place.err"
    with said.open("w") as err:
        in_place = slots.start(stderr=err)
    _wait_for(lambda: "it waits for msg-0" in said.read_text(), "the in-place run waiting")
    assert slots.alive() == ["msg-0"]  # its agent has not started beside the other
    (slots.gate / "msg-0").touch()
    assert _finish([first]) == [0]
    _wait_for(lambda: slots.alive() == ["ws"], "the in-place task running")  # cwd: the tree
    third = run_worker(slots.ws, "run", "--use-worktree")
    assert third.returncode == 75 and "slots" in third.stderr
    slots.open_gate()
    out, _ = in_place.communicate()
    report = json.loads(out)
    assert report["outcome"] == "success" and "IN_PLACE_WAITED" in report["reason_codes"]
    assert slots.most_alive() == 1


def test_a_usage_limit_in_one_slot_pauses_every_slot(slots: Slots) -> None:
    """One slot's agent hits its usage limit: the task waits for the reset, the task running
    in the other slot waits before its next call (no call made), and no new task starts."""
    _queue(slots.ws, 3)
    slots.answers("msg-0", {"usage_limit_text": True})
    slots.answers("msg-1", {"status": "continue", "reason": "more to do"}, {"status": "success"})
    first = slots.start("--use-worktree")
    _wait_for(lambda: slots.alive() == ["msg-0"], "msg-0 running")
    second = slots.start("--use-worktree")
    _wait_for(lambda: sorted(slots.alive()) == ["msg-0", "msg-1"], "msg-1 running")
    (slots.gate / "msg-0").touch()
    out, _ = first.communicate()
    assert json.loads(out)["outcome"] == "waiting"
    held = json.loads(run_worker(slots.ws, "run", "--json", "--use-worktree").stdout)
    assert held["outcome"] == "idle" and "USAGE_LIMIT_HELD" in held["reason_codes"]
    (slots.gate / "msg-1").touch()
    out, _ = second.communicate()
    report = json.loads(out)
    assert (report["outcome"], report["reason_codes"][-1]) == ("waiting", "USAGE_LIMIT")
    calls = (slots.scripts / "msg-1.calls.jsonl").read_text().splitlines()
    assert len(calls) == 1  # the second call was never made
    assert slots.starts()["msg-2"] == 0


def _serve(slots: Slots, *args: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "worker", "serve", "--json", "--workspace", str(slots.ws)]
    proc = subprocess.Popen(
        [*argv, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    slots.procs.append(proc)
    return proc


def test_serve_keeps_every_slot_busy_and_each_task_runs_once(
    slots: Slots, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`worker serve` with two slots: two tasks run side by side (a `worker run` process per
    slot), the next start as slots free, and after four runs the four tasks ran once each."""
    monkeypatch.setenv("WORKER_MAX_PARALLEL", "2")
    ids = _queue(slots.ws, 4)
    server = _serve(slots, "--use-worktree", "--max-cycles", "4", "--interval", "60")
    _wait_for(lambda: len(slots.alive()) == 2, "two agents running")
    slots.open_gate()
    out, err = server.communicate()
    assert server.returncode == 0, err
    assert json.loads(out)["cycles"] == 4
    assert slots.most_alive() == 2
    assert slots.successes() == Counter({msg_id: 1 for msg_id in ids})


def test_stopping_serve_stops_every_slots_task_and_gives_it_back(
    slots: Slots, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM (Ctrl-C alike) to `worker serve` reaches the run of every slot: each agent is
    ended, each task released (`stopped`), and the next run takes one of them again."""
    monkeypatch.setenv("WORKER_MAX_PARALLEL", "2")
    _queue(slots.ws, 2)
    server = _serve(slots, "--use-worktree", "--interval", "60")
    _wait_for(lambda: len(slots.alive()) == 2, "two agents running")
    server.send_signal(signal.SIGTERM)
    _, err = server.communicate()
    assert server.returncode == 0, err
    assert slots.alive() == []
    with Store(load_settings(slots.ws).db_path) as store:
        outcomes = [r[0] for r in store.db.execute("SELECT outcome FROM runs ORDER BY id")]
    assert outcomes == ["stopped", "stopped"]
    slots.open_gate()
    again = json.loads(run_worker(slots.ws, "run", "--json", "--use-worktree").stdout)
    assert again["outcome"] == "success" and again["task_id"] in ("msg-0", "msg-1")


def test_cancel_reaches_the_slot_that_runs_the_task_and_no_other(slots: Slots) -> None:
    """Two slots run two tasks; `worker cancel msg-0` ends msg-0's agent in its slot (the task
    is cancelled), while msg-1 in the other slot goes on to its success."""
    _queue(slots.ws, 2)
    procs = [slots.start("--use-worktree") for _ in range(2)]
    _wait_for(lambda: len(slots.alive()) == 2, "two agents running")
    cancel = run_worker(slots.ws, "cancel", "msg-0")
    assert cancel.returncode == 0, cancel.stderr
    _wait_for(lambda: slots.alive() == ["msg-1"], "msg-0's agent ended")
    (slots.gate / "msg-1").touch()
    reports = sorted((json.loads(proc.communicate()[0]) for proc in procs), key=_task)
    assert [(r["task_id"], r["outcome"]) for r in reports] == [
        ("msg-0", "cancelled"),
        ("msg-1", "success"),
    ]


def _task(report: dict[str, object]) -> str:
    return str(report["task_id"])


def test_without_the_setting_a_run_holds_the_workspace_for_its_whole_task(
    slots: Slots, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`max_parallel` absent: today's behaviour, one run at a time under the workspace lock (a
    second run exits 75 while the first one's agent works, even with worktrees); no slot."""
    monkeypatch.delenv("WORKER_MAX_PARALLEL")
    _queue(slots.ws, 2)
    first = slots.start("--use-worktree")
    _wait_for(lambda: slots.alive() == ["msg-0"], "the first task running")
    second = run_worker(slots.ws, "run", "--use-worktree")
    assert second.returncode == 75 and "another worker run holds the lock" in second.stderr
    slots.open_gate()
    assert _finish([first]) == [0]
    assert not (load_settings(slots.ws).state / "slots").exists()


def test_serve_and_cron_runs_together_share_the_slots_and_run_each_task_once(
    slots: Slots, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`worker serve` and `worker run`s started beside it (a cron line left in place) share
    the two slots: never more than two agents, each task once; a dry run meanwhile names a
    task no slot runs."""
    monkeypatch.setenv("WORKER_MAX_PARALLEL", "2")
    ids = _queue(slots.ws, 4)
    runs = [slots.start("--use-worktree") for _ in range(3)]
    server = _serve(slots, "--use-worktree", "--interval", "60")
    _wait_for(lambda: len(slots.alive()) == 2, "two agents running")
    dry = json.loads(run_worker(slots.ws, "run", "--dry-run", "--json").stdout)
    assert dry["task_id"] not in slots.alive()
    slots.open_gate()
    _finish(runs)
    _wait_for(lambda: sum(slots.successes().values()) == 4, "the four tasks done")
    server.send_signal(signal.SIGTERM)
    server.communicate()
    assert slots.most_alive() == 2
    assert slots.starts() == Counter({msg_id: 1 for msg_id in ids})
    assert slots.successes() == Counter({msg_id: 1 for msg_id in ids})
