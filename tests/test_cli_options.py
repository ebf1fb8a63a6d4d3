"""The root's options anywhere on the line (`worker run -v --dry-run`), and worker's own
diagnostics at the level `-v`, `--quiet`, `--log-level` or WORKER_LOG_LEVEL chose, on stderr
and in the run's log. Through the real command (a subprocess: logging is set up once)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import FakeAgent, run_worker, state_of, write_message
from worker.cli.common import lift_global_options

VERBOSE_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO) worker\.", re.M)


def test_global_options_are_lifted_from_anywhere_before_the_double_dash() -> None:
    """`-v`, `--quiet`, `--log-level X` and `--log-level=X` move to the front, the rest keeps
    its order; what follows `--` is an argument, never an option of worker's."""
    assert lift_global_options(["run", "-v", "--dry-run"]) == (["-v"], ["run", "--dry-run"])
    assert lift_global_options(["log", "--log-level", "info", "-q", "--json"]) == (
        ["--log-level", "info", "-q"],
        ["log", "--json"],
    )
    assert lift_global_options(["submit", "t", "--log-level=debug", "--", "-v"]) == (
        ["--log-level=debug"],
        ["submit", "t", "--", "-v"],
    )


def test_verbose_works_after_the_command_as_before_it(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """`worker run -v --dry-run` (once "No such option: -v") exits 0; `worker run -v` and
    `worker -v run` both print worker's timestamped debug lines on stderr (the agent's
    command line); without -v there are none."""
    for name in ("msg-1", "msg-2", "msg-3"):
        write_message(workspace, name)
    dry = run_worker(workspace, "run", "-v", "--dry-run")
    assert dry.returncode == 0 and "would take msg-1" in dry.stdout, dry.stderr
    after = run_worker(workspace, "run", "-v")
    before = run_worker(workspace, "-v", "run")
    plain = run_worker(workspace, "run")
    assert after.returncode == before.returncode == plain.returncode == 0, after.stderr
    assert VERBOSE_LINE.search(after.stderr) and VERBOSE_LINE.search(before.stderr)
    assert not VERBOSE_LINE.search(plain.stderr)


def test_worker_log_level_from_the_environment_and_the_option_over_it(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """WORKER_LOG_LEVEL=info shows worker's info lines (the agent's command line);
    `--log-level error` after the command wins over the variable; a level that is none
    exits 78 naming the variable."""
    write_message(workspace, "msg-1")
    write_message(workspace, "msg-2")
    info = run_worker(workspace, "run", env={"WORKER_LOG_LEVEL": "info"})
    error = run_worker(workspace, "run", "--log-level", "error", env={"WORKER_LOG_LEVEL": "info"})
    bad = run_worker(workspace, "status", env={"WORKER_LOG_LEVEL": "loud"})
    assert info.returncode == error.returncode == 0
    assert "info: run: " in info.stderr and "info:" not in error.stderr
    assert "WORKER_LOG_LEVEL" not in info.stderr  # a variable of worker's, not an unknown one
    assert bad.returncode == 78 and "WORKER_LOG_LEVEL='loud' is no log level" in bad.stderr


def test_quiet_after_a_command_leaves_only_errors_on_stderr(workspace: Path) -> None:
    """`worker status --quiet` (status has no --quiet of its own) is accepted and silences the
    warning about a variable that is no setting, which `worker status` prints."""
    env = {"WORKER_MACHINE_IDD": "x"}
    loud = run_worker(workspace, "status", env=env)
    quiet = run_worker(workspace, "status", "--quiet", env=env)
    assert loud.returncode == quiet.returncode == 0
    assert "WORKER_MACHINE_IDD" in loud.stderr and quiet.stderr == ""
    assert quiet.stdout == loud.stdout


def test_quiet_before_run_reaches_runs_own_quiet(workspace: Path, fake_claude: FakeAgent) -> None:
    """`worker --quiet run` is `run --quiet` too: the result only, none of the progress lines
    a plain `worker run` prints."""
    for name in ("msg-1", "msg-2", "msg-3"):
        write_message(workspace, name)
    own = run_worker(workspace, "run", "--quiet")
    root = run_worker(workspace, "--quiet", "run")
    loud = run_worker(workspace, "run")
    assert own.returncode == root.returncode == loud.returncode == 0, root.stderr
    shape = [line.split(":")[0] for line in own.stdout.splitlines()]
    assert [line.split(":")[0] for line in root.stdout.splitlines()] == shape
    assert len(loud.stdout.splitlines()) > len(shape)


def test_the_runs_log_holds_workers_diagnostics_at_the_chosen_level(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """A run at WORKER_LOG_LEVEL=info writes worker's own lines (the agent's command line,
    secrets masked) to `logs/run-<id>/worker.log`; at the default level an uneventful run
    leaves no such file."""
    write_message(workspace, "msg-1")
    done = run_worker(workspace, "run", env={"WORKER_LOG_LEVEL": "info"})
    assert done.returncode == 0, done.stderr
    (log,) = (state_of(workspace) / "logs").glob("run-*/worker.log")
    text = log.read_text(encoding="utf-8")
    assert re.search(r"INFO worker\.process\.proc: run: .*claude", text), text
    write_message(workspace, "msg-2")
    assert run_worker(workspace, "run").returncode == 0
    assert len(list((state_of(workspace) / "logs").glob("run-*/worker.log"))) == 1
