"""One state, whoever runs worker: the schedule `worker schedule` prints pins the state folder
this shell resolved, so a run started by cron (`env -i`: no XDG_STATE_HOME, another HOME)
shares the inbox, database and logs of the user's shell; `worker doctor` says when a schedule
installed here would resolve another state folder."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import FAKE_CLAUDE, needs_posix
from worker.cli.app import app
from worker.config import load_settings
from worker.process.platform.installed import crontab_jobs, job_locations, systemd_job


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with the default state folder (under this shell's XDG_STATE_HOME), no
    maintenance task, and a stand-in `claude` that needs no variable of its own."""
    ws = tmp_path / "project"
    ws.mkdir()
    script = tmp_path / "answers.json"
    script.write_text(json.dumps({"answers": [{"status": "success", "reason": "done"}]}))
    claude = tmp_path / "bin" / "claude"
    claude.parent.mkdir()
    claude.write_text(
        f"#!/bin/sh\nFAKE_CLAUDE_SCRIPT={shlex.quote(str(script))} "
        f"FAKE_CLAUDE_LOG={shlex.quote(str(tmp_path / 'calls.jsonl'))} "
        f'exec {shlex.quote(sys.executable)} {shlex.quote(str(FAKE_CLAUDE))} "$@"\n'
    )
    claude.chmod(0o755)
    monkeypatch.setenv("WORKER_CLAUDE_BIN", str(claude))
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    return ws


def _cron_line(cli: CliRunner, ws: Path) -> str:
    result = cli.invoke(app, ["schedule", "cron", "-w", str(ws)])
    assert result.exit_code == 0, result.output
    (job,) = [line for line in result.stdout.splitlines() if line and not line.startswith("#")]
    return job


@needs_posix("cron's shell and env -i")
def test_a_cron_run_under_env_i_shares_the_inbox_and_state_of_the_users_shell(
    cli: CliRunner, project: Path, tmp_path: Path
) -> None:
    """`worker submit` in the user's shell, then the printed crontab line run as cron runs it
    (`env -i`, HOME of its own, /usr/bin:/bin): the cron-run worker takes the task, and
    `worker log` in the user's shell shows its run. Before, the line carried no state folder
    and the cron run used `$HOME/.local/state/...`: another inbox, which was empty."""
    job = _cron_line(cli, project)
    state = load_settings(project).state
    assert f"WORKER_STATE_DIR={state}" in job  # pinned, beside PATH and the WORKER_* ones
    submitted = cli.invoke(app, ["submit", "fix the typo", "-w", str(project)])
    assert submitted.exit_code == 0, submitted.output
    command = job.split(None, 5)[5].replace("\\%", "%")  # cron's five time fields
    cron_home = tmp_path / "cron-home"
    cron_home.mkdir()
    proc = subprocess.run(
        ["env", "-i", f"HOME={cron_home}", "PATH=/usr/bin:/bin", "/bin/sh", "-c", command],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    cron_log = (state / "logs" / "cron-run.log").read_text()
    assert "success" in cron_log, cron_log
    assert not (cron_home / ".local").exists()  # no second state folder
    runs = json.loads(cli.invoke(app, ["log", "--json", "-w", str(project)]).stdout)
    rows = runs["runs"] if isinstance(runs, dict) else runs
    assert [row["outcome"] for row in rows] == ["success"]
    assert not list((state / "inbox").glob("*.json"))  # taken from the user's inbox


def test_a_state_dir_in_worker_toml_is_not_pinned_over(cli: CliRunner, project: Path) -> None:
    """worker.toml is read by the scheduled run too: the schedule leaves its `state_dir` be."""
    (project / "worker.toml").write_text(f'state_dir = "{project.parent / "own"}"\n')
    job = _cron_line(cli, project)
    assert "WORKER_STATE_DIR" not in job and str(project.parent / "own" / "logs") in job
    for kind in ("systemd", "windows"):
        text = json.dumps(
            json.loads(cli.invoke(app, ["schedule", kind, "--json", "-w", str(project)]).stdout)
        )
        assert "WORKER_STATE_DIR=" not in text


def test_systemd_and_task_scheduler_pin_the_state_folder(cli: CliRunner, project: Path) -> None:
    state = load_settings(project).state
    files = json.loads(
        cli.invoke(app, ["schedule", "systemd", "--json", "-w", str(project)]).stdout
    )
    service = next(t for n, t in files["files"].items() if n.endswith(".service"))
    assert f'Environment="WORKER_STATE_DIR={state}"' in service
    files = json.loads(
        cli.invoke(app, ["schedule", "windows", "--json", "-w", str(project)]).stdout
    )
    (xml,) = files["files"].values()
    assert f'set "WORKER_STATE_DIR={state}"&amp;&amp; ' in xml


def _old_crontab(project: Path, python: str) -> str:
    """A crontab with a line as an older `worker schedule cron` printed it (no state folder),
    one for another workspace, and an environment line."""
    return (
        "MAILTO=me@example.com\n"
        "# worker run for the project\n"
        f"*/5 * * * * cd {project} && PATH=/usr/bin:/bin WORKER_MACHINE_ID=test-machine "
        f"{python} -m worker run --workspace {project} >> /tmp/cron-run.log 2>&1\n"
        f"0 * * * * {python} -m worker run --workspace /elsewhere\n"
        "30 2 * * * backup.sh\n"
    )


def test_a_crontab_line_is_read_as_cron_runs_it(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "cron-home"
    jobs = list(crontab_jobs(_old_crontab(project, "/usr/bin/python3"), home))
    assert [(job.where, job.workspace) for job in jobs] == [
        ("crontab line 3", project),
        ("crontab line 4", Path("/elsewhere")),
    ]
    assert jobs[0].env == {
        "HOME": str(home),
        "MAILTO": "me@example.com",
        "PATH": "/usr/bin:/bin",
        "WORKER_MACHINE_ID": "test-machine",
    }
    state, inbox = job_locations(jobs[0])
    assert state.parent == home / ".local" / "state" / "worker" and inbox == state / "inbox"
    assert state != load_settings(project).state  # this shell has XDG_STATE_HOME


def _fake_crontab(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "crontab-bin"
    folder.mkdir(parents=True)
    (folder / "crontab.txt").write_text(text)
    program = folder / "crontab"
    program.write_text(f"#!/bin/sh\nexec cat {shlex.quote(str(folder / 'crontab.txt'))}\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")


def _schedule_findings(cli: CliRunner, project: Path) -> list[tuple[str, str]]:
    result = cli.invoke(app, ["doctor", "--json", "-w", str(project)])
    data = json.loads(result.stdout)
    return [(f["status"], f["message"]) for f in data["findings"] if f["check"] == "schedule"]


@needs_posix("a crontab program")
def test_doctor_says_when_an_installed_crontab_line_uses_another_state_folder(
    cli: CliRunner, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_crontab(tmp_path, _old_crontab(project, sys.executable), monkeypatch)
    ((status, message),) = _schedule_findings(cli, project)
    assert status == "fail" and message.startswith("crontab line 3 runs worker here with")
    assert str(load_settings(project).state) in message
    assert "`worker schedule cron` prints now (it pins WORKER_STATE_DIR)" in message
    # The line printed now: the same state folder, and doctor says so.
    _fake_crontab(tmp_path / "now", _cron_line(cli, project) + "\n", monkeypatch)
    ((status, message),) = _schedule_findings(cli, project)
    assert status == "ok" and message.startswith("crontab line 1 uses this state folder")


def test_doctor_reads_the_systemd_user_units(
    cli: CliRunner, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    units = home / ".config" / "systemd" / "user"
    units.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", "/nonexistent")  # no crontab program: cron is not read
    files = json.loads(
        cli.invoke(app, ["schedule", "systemd", "--json", "-w", str(project)]).stdout
    )
    name = next(n for n in files["files"] if n.endswith(".service"))
    service = files["files"][name]
    (units / name).write_text(service)
    ((status, message),) = _schedule_findings(cli, project)
    assert status == "ok" and str(units / name) in message
    old = "\n".join(line for line in service.splitlines() if "WORKER_STATE_DIR" not in line)
    (units / name).write_text(old)
    ((status, message),) = _schedule_findings(cli, project)
    assert status == "fail" and str(home / ".local" / "state" / "worker") in message
    job = systemd_job(old, name, home)
    assert job is not None and job.workspace == project and job.env["HOME"] == str(home)
