"""`worker serve`, `worker supervise [status]` and `worker schedule` through the real CLI."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conftest import needs_posix, state_of
from tests.test_daemon_support import Repo, child_script, settings_for, until
from worker.cli.app import app
from worker.daemon.settings import backoff_sum
from worker.daemon.state import SupervisorState
from worker.daemon.supervisor import Supervisor
from worker.errors import ConfigError
from worker.state.store import Store


def _invoke(cli: CliRunner, *args: str) -> Any:
    return cli.invoke(app, list(args))


def test_schedule_cron_prints_one_line_for_run(cli: CliRunner, workspace: Path) -> None:
    result = _invoke(cli, "schedule", "cron", "--workspace", str(workspace))
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if not line.startswith("#")]
    assert len(lines) == 1
    assert lines[0].startswith("*/5 * * * * cd ")
    assert f"-m worker run --workspace {workspace}" in lines[0]


def test_schedule_cron_for_supervise_starts_at_boot_with_a_watchdog(
    cli: CliRunner, workspace: Path
) -> None:
    result = _invoke(cli, "schedule", "cron", "--target", "supervise", "-w", str(workspace))
    lines = [line for line in result.stdout.splitlines() if not line.startswith("#")]
    assert [line.split(" cd ")[0] for line in lines] == ["@reboot", "*/5 * * * *"]
    assert all("-m worker supervise" in line for line in lines)


def test_schedule_systemd_units_size_the_start_limit_to_the_backoff(
    cli: CliRunner, workspace: Path
) -> None:
    result = _invoke(cli, "schedule", "systemd", "--json", "-w", str(workspace))
    files = json.loads(result.stdout)["files"]
    service = files[f"worker-run-{workspace.name}.service"]
    timer = files[f"worker-run-{workspace.name}.timer"]
    keys = dict(
        line.split("=", 1)
        for line in service.splitlines()
        if "=" in line and not line.startswith("#")
    )
    assert keys["Restart"] == "on-failure" and keys["Type"] == "oneshot"
    assert (keys["StartLimitBurst"], keys["StartLimitIntervalSec"]) == ("5", "300")
    assert int(keys["StartLimitIntervalSec"]) > backoff_sum(1, 60, 4)
    assert keys["RestartPreventExitStatus"] == "78" and keys["SuccessExitStatus"] == "75"
    assert "OnUnitActiveSec=300s" in timer and "WantedBy=timers.target" in timer

    sup = _invoke(cli, "schedule", "systemd", "--target", "supervise", "-w", str(workspace))
    assert "Type=simple" in sup.stdout and "WantedBy=default.target" in sup.stdout
    assert ".timer" not in sup.stdout.split("[Unit]")[1]


def test_schedule_windows_is_task_scheduler_xml(cli: CliRunner, workspace: Path) -> None:
    result = _invoke(cli, "schedule", "windows", "--json", "-w", str(workspace))
    (xml,) = json.loads(result.stdout)["files"].values()
    ns = {"t": "http://schemas.microsoft.com/windows/2004/02/mit/task"}
    root = ET.fromstring(xml)
    assert root.findtext("t:Settings/t:MultipleInstancesPolicy", namespaces=ns) == "IgnoreNew"
    assert root.findtext("t:Settings/t:StartWhenAvailable", namespaces=ns) == "true"
    assert root.findtext(".//t:Repetition/t:Interval", namespaces=ns) == "PT5M"
    assert "run --workspace" in (root.findtext(".//t:Arguments", namespaces=ns) or "")


def test_supervise_status_before_and_after_a_supervisor_ran(
    cli: CliRunner, workspace: Path, tmp_path: Path
) -> None:
    empty = json.loads(_invoke(cli, "supervise", "status", "--json", "-w", str(workspace)).stdout)
    assert empty["supervisor"]["running"] is False and empty["events"] == []
    assert not state_of(workspace).exists()  # status alone writes nothing

    repo = Repo(tmp_path / "repo")
    rev = repo.commit({"child.py": child_script("healthy")})
    Supervisor(settings_for(workspace, repo), until=until(lambda s: s.good == rev)).run()
    data = json.loads(_invoke(cli, "supervise", "status", "--json", "-w", str(workspace)).stdout)
    assert data["supervisor"]["running"] is False and "stopped_at" in data["supervisor"]
    assert data["state"]["current_good_rev"] == rev
    assert [r["revision"] for r in data["revisions"]] == [rev]
    assert [e["kind"] for e in data["events"]][-2:] == ["promote", "stop"]
    assert data["serve"]["serve.stopped"]["reason"] == "SIGTERM"

    text = _invoke(cli, "supervise", "status", "-w", str(workspace))
    assert text.exit_code == 0
    assert f"current_good_rev: {rev}" in text.stdout
    assert "restart history" in text.stdout and "promote" in text.stdout


def test_supervise_refuses_root_without_allow_root(
    cli: CliRunner, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings_for(workspace, allow_root=False)
    monkeypatch.setattr("worker.daemon.guard.current_euid", lambda: 0)
    result = _invoke(cli, "supervise", "-w", str(workspace))
    assert isinstance(result.exception, ConfigError)  # main() turns it into exit 78
    assert result.exception.exit_code == 78
    assert "--allow-root" in str(result.exception)


def test_serve_command_loops_over_run_once(
    cli: CliRunner, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[object] = []

    class Report:
        outcome, exit_code, run_id = "idle", 0, 0

    def fake_run_once(settings: object, options: object) -> Report:
        calls.append(options)
        report = Report()
        report.run_id = 9 + len(calls)  # the runs' own numbers, not the cycles'
        return report

    monkeypatch.setattr("worker.run.runner.run_once", fake_run_once)
    result = _invoke(cli, "serve", "-w", str(workspace), "--interval", "0.01", "--max-cycles", "2")
    assert result.exit_code == 0, result.output
    # Not a terminal: timestamped lines (as journald shows them), a banner first.
    lines = [re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", "", x) for x in result.stdout.splitlines()]
    assert lines[0].startswith("worker serve on test-machine: ")
    assert lines[1:] == [  # no "next cycle at" for a wait shorter than a minute
        "run 10: idle",
        "run 11: idle",
        "stopped after 2 run(s): max cycles (2)",
    ]
    assert len(calls) == 2


@needs_posix("sends SIGTERM; on Windows send_signal(SIGTERM) terminates outright")
def test_supervise_keeps_the_real_worker_serve_running_and_stops_it_on_sigterm(
    workspace: Path, fake_claude: Any
) -> None:
    """No fakes between the two: `python -m worker supervise` starts `python -m worker serve`
    (the real runner, an empty inbox), sees it ready, and stops it cleanly on SIGTERM."""
    settings = settings_for(workspace, child_command=None, heartbeat_s=0.05)
    settings.logs.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker", "supervise", "--workspace", str(workspace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(6000):  # a budget against hangs, not a timing assertion
            if proc.poll() is not None or _has_event(settings.db_path, "ready"):
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    serve_log = (settings.logs / "serve.log").read_text()
    assert proc.returncode == 0, err + serve_log
    state = SupervisorState(Store(settings.db_path))
    assert [e["kind"] for e in state.events()] == ["supervisor_start", "start", "ready", "stop"]
    assert state.events(1, kind="stop")[0]["exit_code"] == 0
    with Store(settings.db_path) as store:
        assert json.loads(store.get("serve.stopped") or "{}")["reason"] == "SIGTERM"


def _has_event(db_path: Path, kind: str) -> bool:
    if not db_path.exists():
        return False
    with sqlite3.connect(db_path) as db:
        try:
            row = db.execute("SELECT 1 FROM supervisor_events WHERE kind = ?", (kind,))
            return row.fetchone() is not None
        except sqlite3.OperationalError:
            return False
