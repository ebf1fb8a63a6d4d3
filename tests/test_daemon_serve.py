"""`worker serve`: the loop, its health signals, inbox wake-ups and a clean stop on SIGTERM.

The loop is driven with a fake `run_once` (in-process, or as a fake `worker.run.runner` module in a
real subprocess); one end-to-end test runs the real runner with the fake `claude`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import FakeAgent, needs_posix, state_of, write_message
from tests.test_daemon_support import write_config
from worker.config import Settings, load_settings
from worker.daemon import health
from worker.daemon import serve as serve_module
from worker.daemon.serve import Server
from worker.errors import ConfigError, LockHeld
from worker.models import SETUP_PROBLEM
from worker.state.store import Store


@dataclass
class Report:
    outcome: str = "idle"
    exit_code: int = 0
    reason_codes: list[str] = field(default_factory=list)


def _settings(ws: Path, **daemon: Any) -> Settings:
    write_config(
        ws,
        **{
            "interval_s": 0.01,
            "inbox_poll_s": 0.01,
            "heartbeat_s": 0.02,
            "busy_retry_s": 0.01,
            **daemon,
        },
    )
    return load_settings(ws)


def _kv(ws: Path, key: str) -> dict[str, Any]:
    with Store(state_of(ws) / "worker.db") as store:
        return json.loads(store.get(key) or "{}")


def _guard(server: Server, seconds: float = 120.0) -> threading.Timer:
    """A safety net so a broken loop fails the test instead of hanging it."""
    timer = threading.Timer(seconds, server.stop, args=("guard",))
    timer.daemon = True
    timer.start()
    return timer


def test_serve_runs_cycles_and_signals_readiness_and_heartbeats(workspace: Path) -> None:
    settings = _settings(workspace)
    seen: list[dict[str, Any]] = []

    def run_once(s: Settings, options: object) -> Report:
        seen.append(
            {
                "ready_file": health.ready_file(s.state).exists(),
                "ready": _kv(workspace, health.READY_KEY),
            }
        )
        return Report("idle")

    report = Server(settings, run_once=run_once, make_options=dict, max_cycles=3).run()
    assert (report.cycles, report.exit_code, report.stopped_by) == (3, 0, "max cycles (3)")
    assert [c.outcome for c in report.last] == ["idle"] * 3
    assert all(s["ready_file"] for s in seen)  # readiness is there before the first run
    assert seen[0]["ready"]["pid"] == os.getpid()
    beat = _kv(workspace, health.HEARTBEAT_KEY)
    assert beat["phase"] == "idle" and beat["cycle"] == 3 and beat["outcome"] == "idle"
    assert _kv(workspace, health.STOPPED_KEY)["reason"] == "max cycles (3)"
    assert not health.ready_file(settings.state).exists()  # gone once stopped


def test_lock_held_by_another_run_means_sleep_and_retry(workspace: Path) -> None:
    calls: list[int] = []

    def run_once(s: Settings, options: object) -> Report:
        calls.append(1)
        if len(calls) == 1:
            raise LockHeld("another worker run holds the lock")
        return Report("success")

    report = Server(_settings(workspace), run_once=run_once, make_options=dict, max_cycles=2).run()
    assert [c.outcome for c in report.last] == ["locked", "success"]
    assert report.exit_code == 0


def test_configuration_error_stops_serve_with_78_so_it_is_not_restarted(
    workspace: Path,
) -> None:
    def run_once(s: Settings, options: object) -> Report:
        raise ConfigError("modes.json: unknown key")

    report = Server(_settings(workspace), run_once=run_once, make_options=dict).run()
    assert report.exit_code == 78 and report.cycles == 1


def test_maintenance_that_cannot_run_its_checks_does_not_stop_serve(workspace: Path) -> None:
    """`worker run` exits 78 when maintenance's checks cannot run (the set-up to fix), but
    that stops maintenance alone: serve goes on with the other sources; a real configuration
    error (the agent cannot start) still stops it."""
    reports = iter(
        [
            Report("failure", 78, [SETUP_PROBLEM]),
            Report("success"),
            Report("stopped", 78, ["AGENT_NOT_FOUND"]),
        ]
    )
    server = Server(_settings(workspace), run_once=lambda s, o: next(reports), make_options=dict)
    report = server.run()
    assert [c.outcome for c in report.last] == ["setup_problem", "success", "config_error"]
    assert (report.cycles, report.exit_code) == (3, 78)


def test_a_slots_run_ended_on_maintenance_set_up_is_told_from_a_configuration_error(
    workspace: Path,
) -> None:
    """With slots each run is a process: its exit 78 is read with its run's reason codes."""
    with Store(load_settings(workspace).db_path) as store:
        setup = store.start_run("m", 4101)
        store.finish_run(setup, outcome="failure", reason_codes=[SETUP_PROBLEM])
        other = store.start_run("m", 4102)
        store.finish_run(other, outcome="stopped", reason_codes=["AGENT_NOT_FOUND"])
        assert serve_module._setup_problem(store, 4101)
        assert not serve_module._setup_problem(store, 4102)
        assert not serve_module._setup_problem(store, 4103)  # no run recorded: not known


def test_unexpected_error_crashes_serve_so_the_supervisor_sees_it(workspace: Path) -> None:
    def run_once(s: Settings, options: object) -> Report:
        raise RuntimeError("bug")

    server = Server(_settings(workspace), run_once=run_once, make_options=dict)
    try:
        server.run()
    except RuntimeError:
        pass
    else:  # pragma: no cover - the assertion below explains
        raise AssertionError("serve swallowed an unexpected error")
    assert _kv(workspace, health.STOPPED_KEY)["reason"] == "crashed"


def test_a_new_inbox_file_wakes_serve_before_the_interval(workspace: Path) -> None:
    """The interval is an hour; the second run happens because a message arrived."""
    settings = _settings(workspace, interval_s=3600.0)
    done = threading.Event()

    def drop_messages() -> None:
        n = 0
        while not done.wait(0.05):  # a new name each time, whenever serve primes its watch
            n += 1
            (workspace / "inbox" / f"m{n}.json").write_text("{}", encoding="utf-8")

    def run_once(s: Settings, options: object) -> Report:
        return Report("idle")

    server = Server(settings, run_once=run_once, make_options=dict, max_cycles=2)
    guard = _guard(server)
    dropper = threading.Thread(target=drop_messages, daemon=True)
    dropper.start()
    try:
        report = server.run()
    finally:
        done.set()
        guard.cancel()
    assert report.stopped_by == "max cycles (2)"


_FAKE_RUNNER = """
import json, sys, threading, types
from dataclasses import dataclass, field
from pathlib import Path

ws = Path(sys.argv[1])
stop = threading.Event()
fake = types.ModuleType("worker.run.runner")

@dataclass
class RunOptions:
    dry_run: bool = False

@dataclass
class RunReport:
    outcome: str
    exit_code: int = 0

def request_stop(reason="stop requested"):
    (ws / "stop-reason.txt").write_text(reason)
    stop.set()

def run_once(settings, options=None):
    from worker.state.store import Store
    with Store(settings.db_path) as store:
        store.claim("task-1", "inbox", settings.machine_id, 1, 3600)
        (ws / "work.txt").write_text("half done\\n")
        (ws / "task-started").write_text("yes")
        stop.wait(300)
        with (ws / "work.txt").open("a") as fh:
            fh.write("kept\\n")
        store.release_claim("task-1", "released")
    return RunReport("stopped")

fake.RunOptions, fake.RunReport = RunOptions, RunReport
fake.request_stop, fake.run_once = request_stop, run_once
sys.modules["worker.run.runner"] = fake
sys.argv = ["worker", "serve", "--workspace", str(ws), "--json"]
from worker.cli.app import main
main()
"""


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    for _ in range(6000):  # a budget, not a timing assertion
        if path.exists() or proc.poll() is not None:
            break
        time.sleep(0.02)
    assert path.exists(), proc.stderr.read() if proc.stderr else ""


@needs_posix("sends SIGTERM; on Windows send_signal(SIGTERM) terminates outright")
def test_sigterm_mid_task_stops_the_agent_keeps_the_work_and_releases_the_task(
    workspace: Path, tmp_path: Path
) -> None:
    """Through the real CLI in a real process: the signal reaches runner.request_stop."""
    _settings(workspace, interval_s=3600.0)
    script = tmp_path / "serve_with_fake_runner.py"
    script.write_text(textwrap.dedent(_FAKE_RUNNER), encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(workspace)],
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for(workspace / "task-started", proc)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    data = json.loads(out)
    assert data["stopped_by"] == "SIGTERM" and data["last"][0]["outcome"] == "stopped"
    assert (workspace / "stop-reason.txt").read_text() == "SIGTERM"
    assert (workspace / "work.txt").read_text() == "half done\nkept\n"
    with Store(state_of(workspace) / "worker.db") as store:
        claim = store.claim_of("task-1")
    assert claim is not None and claim["state"] == "released"
    assert _kv(workspace, health.STOPPED_KEY)["reason"] == "SIGTERM"


def _serve_real_runner_until_sigterm(
    workspace: Path, fake_claude: FakeAgent, hang_s: float, budget_s: float
) -> tuple[int | None, str]:
    _settings(workspace, interval_s=3600.0)
    fake_claude.answers({"hang": hang_s, "status": "success", "reason": "never reached"})
    write_message(workspace, "msg-1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker", "serve", "--workspace", str(workspace), "--json"],
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for(fake_claude.log, proc)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=budget_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, ""
    return proc.returncode, out


@needs_posix("sends SIGTERM; on Windows send_signal(SIGTERM) terminates outright")
def test_sigterm_with_the_real_runner_puts_the_message_back(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """End to end: `python -m worker serve`, the real runner, a fake `claude` that is busy for
    3 s; the stop takes effect at its next event, and the message is available again."""
    code, out = _serve_real_runner_until_sigterm(workspace, fake_claude, 3, 120)
    assert code == 0
    assert json.loads(out)["last"][0]["outcome"] == "stopped"
    assert (workspace / "inbox" / "msg-1.json").exists()
    with Store(state_of(workspace) / "worker.db") as store:
        claim = store.claim_of("msg-1")
    assert claim is not None and claim["state"] == "released"


@needs_posix("sends SIGTERM; on Windows send_signal(SIGTERM) terminates outright")
def test_sigterm_stops_a_silent_agent_promptly(workspace: Path, fake_claude: FakeAgent) -> None:
    code, _ = _serve_real_runner_until_sigterm(workspace, fake_claude, 300, 15)
    assert code == 0


def test_a_stop_landing_just_before_a_cycle_starts_is_not_lost(workspace: Path) -> None:
    """SIGTERM right after the loop checked for a stop, before the cycle began: the cycle
    must not run a whole task unasked-to-stop (the phase was still "idle" then)."""
    settings = _settings(workspace)
    ran: list[bool] = []  # one entry per run_once: was a stop requested by then?
    stop_requests: list[str] = []

    def run_once(s: Settings, options: object) -> Report:
        ran.append(bool(stop_requests))
        return Report("idle")

    server = Server(
        settings, run_once=run_once, make_options=dict, request_stop=stop_requests.append
    )

    class _SignalAfterCheck(threading.Event):
        """The loop's first look at the flag says "go on"; the signal lands right after."""

        fired = False

        def is_set(self) -> bool:
            answer = super().is_set()
            if not answer and not self.fired:
                self.fired = True
                server.stop("SIGTERM")
            return answer

    server._stopping = _SignalAfterCheck()
    guard = _guard(server)
    try:
        report = server.run()
    finally:
        guard.cancel()
    assert report.stopped_by == "SIGTERM"
    assert all(ran), "a cycle ran after SIGTERM without being asked to stop"
