"""The project's own programs run in the agent's box (issue 38, points 3 and 8).

The agent may replace anything in its tree: here it swaps the project's `.venv/bin/python` for
a script that reads `~/.ssh` and writes a marker beside the tree. Maintenance's checks, the
checks that verify the agent's `success`, `worker doctor`'s and the dry run's probe of that
interpreter all start it, in the box: the marker never lands and the key never shows. With the
box off (a trusted source, `mode = "off"`) they run as before, and say so.

The preflight asks the agent's own executable, here and inside the box: a missing one (or one
the box hides) is exit 78 with nothing claimed, never three failed iterations."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.escape_support import outside_tmp
from tests.sandbox_support import SECRET, plant_secret, sandbox_runtime
from tests.test_sandbox import STATUS, bwrap_works, command_mode
from worker.agents.infra import missing_binary, preflight
from worker.agents.registry import adapter_for
from worker.config import load_settings
from worker.modes import Mode, load_modes, modes_path
from worker.results import AgentRequest
from worker.sandbox.runtime import find_runtime, namespaces_problem

from .conftest import git, needs_posix, run_worker, state_of, write_message

__all__ = ["outside_tmp"]  # a fixture, imported for pytest

pytestmark = needs_posix("bubblewrap, srt and a virtual environment's bin/ layout")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    plant_secret(home)
    return home


def boxed_env(runtime: str, tmp_path: Path) -> dict[str, str]:
    """The settings of a run with the box `runtime` ("bwrap" alone, "srt", or "off")."""
    if runtime == "off":
        return {"WORKER_SANDBOX__MODE": "off"}
    if runtime == "bwrap":
        bwrap_works()
        return {"WORKER_SANDBOX__MODE": "auto", "WORKER_SANDBOX__SRT_BIN": str(tmp_path / "no")}
    srt = sandbox_runtime()
    return {
        "WORKER_SANDBOX__MODE": "auto",
        "WORKER_SANDBOX__RUNTIME": "srt",
        "WORKER_SANDBOX__SRT_BIN": str(srt),
    }


def attack_script(outside: Path) -> str:
    """A stand-in for the project's interpreter: it reads the user's key and writes a marker
    beside the tree, then fails as a test run would."""
    return (
        "#!/bin/sh\n"
        f"cat ~/.ssh/id_ed25519 > {outside}/stolen.txt 2>/dev/null\n"
        f"echo pwned > {outside}/escape.txt 2>/dev/null\n"
        'echo "key: $(cat ~/.ssh/id_ed25519 2>&1)"\n'
        "echo '1 failed'; exit 1\n"
    )


FAILING = "#!/bin/sh\necho '1 failed'; exit 1\n"


def project_with_venv(ws: Path, script: str) -> Path:
    """A Python project under git whose `.venv/bin/python` is `script`."""
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n')
    python = ws / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    (ws / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python.write_text(script)
    python.chmod(0o755)
    git(ws, "init", "-q")
    return python


def check_logs(workspace: Path) -> str:
    return "".join(p.read_text() for p in sorted(state_of(workspace).rglob("check-*.log")))


@pytest.mark.parametrize("runtime", ["bwrap", "srt", "off"])
def test_maintenance_runs_the_trees_python_in_the_box(
    workspace: Path, home: Path, tmp_path: Path, runtime: str
) -> None:
    """The agent left its `.venv/bin/python`; daily maintenance runs it. Boxed, it neither
    writes the marker beside the tree nor reads the key; off (the control), it does both."""
    outside = tmp_path / "outside"
    outside.mkdir()
    project_with_venv(workspace, attack_script(outside))
    command_mode(workspace, STATUS)
    done = run_worker(workspace, "run", env=boxed_env(runtime, tmp_path))
    assert done.returncode in (0, 1), done.stderr
    logs = check_logs(workspace)
    assert "1 failed" in logs  # it ran
    if runtime == "off":
        assert (outside / "escape.txt").exists() and SECRET in logs
        return
    assert not (outside / "escape.txt").exists() and not (outside / "stolen.txt").exists()
    assert SECRET not in logs and "key: " in logs


@pytest.mark.parametrize("runtime", ["bwrap", "srt", "off"])
def test_the_verify_step_runs_what_the_agent_left_in_the_box_and_says_where(
    workspace: Path, home: Path, tmp_path: Path, runtime: str
) -> None:
    """Maintenance's check fails (a task for the agent); the agent swaps the interpreter for
    the attack and says `success`; the verify step runs the checks again, in the box: no
    marker, no key. The failing checks the agent is shown say where they ran (off: outside
    the sandbox, and why)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    python = project_with_venv(workspace, FAILING)
    (workspace / "attack.sh").write_text(attack_script(outside))
    command_mode(workspace, f"cat > .prompt.txt; cp attack.sh {python}; " + STATUS)
    done = run_worker(workspace, "run", env=boxed_env(runtime, tmp_path))
    assert done.returncode in (0, 1), done.stderr
    logs = check_logs(workspace)
    assert logs.count("1 failed") == 2  # before the agent, and to verify its `success`
    prompt = (workspace / ".prompt.txt").read_text()
    if runtime == "off":
        assert (outside / "escape.txt").exists() and SECRET in logs
        assert "exit code 1, outside the sandbox: the sandbox is off" in prompt
        return
    assert not (outside / "escape.txt").exists() and not (outside / "stolen.txt").exists()
    assert SECRET not in logs and "key: " in logs
    assert f"exit code 1, in the sandbox ({runtime})" in prompt


@pytest.mark.parametrize("runtime", ["bwrap", "srt"])
def test_doctor_and_the_dry_run_ask_the_trees_python_in_the_box(
    workspace: Path, home: Path, tmp_path: Path, runtime: str
) -> None:
    """`worker doctor` and `worker run --dry-run` ask the project's interpreter whether it has
    pytest: in the box, and they say so; the attack's marker never lands."""
    outside = tmp_path / "outside"
    outside.mkdir()
    project_with_venv(workspace, attack_script(outside))
    env = boxed_env(runtime, tmp_path)
    dry = run_worker(workspace, "run", "--dry-run", env=env)
    assert f"in the sandbox ({runtime})" in dry.stdout, dry.stdout + dry.stderr
    doctor = run_worker(workspace, "doctor", env=env)
    assert f"in the sandbox ({runtime})" in doctor.stdout, doctor.stdout
    assert not (outside / "escape.txt").exists() and not (outside / "stolen.txt").exists()


def test_the_dry_run_says_the_checks_run_outside_a_box_that_is_off(
    workspace: Path, home: Path, tmp_path: Path
) -> None:
    """The box off for a trusted source: the checks run as before, and the dry run says so."""
    project_with_venv(workspace, FAILING)
    dry = run_worker(workspace, "run", "--dry-run", env=boxed_env("off", tmp_path))
    assert 'outside the sandbox: the sandbox is off (sandbox.mode = "off")' in dry.stdout


def _nothing_claimed(workspace: Path) -> None:
    message = json.loads((workspace / "inbox" / "msg-1.json").read_text())
    assert message["status"] == "unread"
    db = sqlite3.connect(state_of(workspace) / "worker.db")
    try:
        assert db.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
        assert db.execute("SELECT COUNT(*) FROM iterations").fetchone()[0] == 0
    finally:
        db.close()


@pytest.mark.parametrize("runtime", ["bwrap", "srt"])
def test_a_missing_agent_executable_with_the_box_on_exits_78_and_claims_nothing(
    workspace: Path, home: Path, tmp_path: Path, runtime: str
) -> None:
    """The regression: with the box on, WORKER_CLAUDE_BIN pointing nowhere was checked as the
    runtime's executable (which exists), and the task failed three iterations with `bwrap:
    execvp ... No such file`. The preflight now asks the agent's own: exit 78, untouched."""
    write_message(workspace, "msg-1")
    env = {
        **boxed_env(runtime, tmp_path),
        "WORKER_FALLBACK__ENABLED": "false",
        "WORKER_CLAUDE_BIN": str(tmp_path / "nowhere" / "claude"),
    }
    done = run_worker(workspace, "run", env=env)
    assert done.returncode == 78, done.stderr
    assert "Claude Code cannot start" in done.stderr and "does not exist" in done.stderr
    assert "No task was taken" in done.stderr
    _nothing_claimed(workspace)


@pytest.mark.parametrize("runtime", ["bwrap", "srt"])
def test_an_agent_executable_the_box_hides_exits_78_and_claims_nothing(
    workspace: Path, home: Path, tmp_path: Path, runtime: str
) -> None:
    """An executable that exists here but not in the box (under a folder `[sandbox] deny_read`
    hides): the preflight asks inside the box, and says so."""
    hidden = tmp_path / "hidden"
    claude = hidden / "claude"
    hidden.mkdir()
    claude.write_text("#!/bin/sh\necho ran > " + str(workspace / "ran.txt") + "\n")
    claude.chmod(0o755)
    write_message(workspace, "msg-1")
    env = {
        **boxed_env(runtime, tmp_path),
        "WORKER_FALLBACK__ENABLED": "false",
        "WORKER_CLAUDE_BIN": str(claude),
        "WORKER_SANDBOX__DENY_READ": json.dumps([str(hidden)]),
    }
    done = run_worker(workspace, "run", env=env)
    assert done.returncode == 78, done.stderr
    assert f"cannot be started inside the sandbox ({runtime})" in done.stderr, done.stderr
    assert not (workspace / "ran.txt").exists()
    _nothing_claimed(workspace)


@pytest.mark.parametrize("runtime", ["bwrap", "srt"])
def test_a_program_gone_after_the_preflight_is_not_found_not_an_agent_error(
    workspace: Path, home: Path, tmp_path: Path, runtime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The box starts, the agent's program does not (removed since the preflight looked):
    the result says not found, which the loop turns into an infrastructure failure (exit 78,
    the task untouched) rather than an iteration the task pays for."""
    for name, value in boxed_env(runtime, tmp_path).items():
        monkeypatch.setenv(name, value)
    gone = tmp_path / "gone" / "agent"
    mode = Mode(id="plain", model="local", maxIterations=1, agent="command", command=[str(gone)])
    adapter = adapter_for(load_settings(workspace), mode)
    request = AgentRequest(prompt="hi", model="local", cwd=workspace, timeout_s=60)
    result = adapter.run(request)
    assert result.sandbox == runtime and result.not_found, result.stderr_tail
    assert str(gone) in missing_binary("command", str(gone)).message


def test_a_check_the_box_refuses_a_write_is_a_set_up_problem_not_a_task(
    workspace: Path, outside_tmp: Path, tmp_path: Path
) -> None:
    """A Makefile's test writes a cache in a folder outside the tree, which the box keeps
    read-only (one outside /tmp, which the box empties): a set-up problem in words (what to
    allow), and no agent is started for it."""
    cache = outside_tmp / ".cache"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "Makefile").write_text(f"test:\n\tmkdir -p {cache}/tool && echo ok\n")
    git(workspace, "init", "-q")
    command_mode(workspace, "echo ran > ran.txt; " + STATUS)
    done = run_worker(workspace, "run", env=boxed_env("bwrap", tmp_path))
    assert "writes where the sandbox refuses" in done.stdout + done.stderr, done.stdout
    assert "[sandbox] allow_write" in done.stdout + done.stderr
    assert not (workspace / "ran.txt").exists() and not (cache / "tool").exists()


def _flaky_bwrap(folder: Path, marker: Path, probe_only: bool) -> Path:
    """A `bwrap` that fails to start once (as a loaded machine's may: EAGAIN), the first time
    it is asked to run the preflight's probe (or anything, without `probe_only`), then is the
    real one; with `marker` made in advance it always fails."""
    real = shutil.which("bwrap")
    fail = (
        f"[ -e {marker} ] && [ -s {marker} ] && exit 1; [ -e {marker} ] || {{ touch {marker}; "
        'echo "bwrap: Creating new namespace failed: Resource temporarily unavailable" >&2; '
        "exit 1; }"
    )
    test = 'case "$*" in *"not found in the box"*) ' + fail + ";; esac" if probe_only else fail
    fake = folder / "bwrap"
    fake.write_text(f'#!/bin/sh\n{test}\nexec {real} "$@"\n')
    fake.chmod(0o755)
    return fake


def _flaky_env(
    workspace: Path, outside: Path, probe_only: bool, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Settings of a box by a `bwrap` that fails once (see `_flaky_bwrap`); its marker."""
    bwrap_works()
    claude = outside / "claude"
    claude.write_text("#!/bin/sh\nexit 0\n")
    claude.chmod(0o755)
    marker = outside / "failed"
    for key, value in {
        "WORKER_SANDBOX__MODE": "auto",
        "WORKER_SANDBOX__RUNTIME": "bwrap",
        "WORKER_SANDBOX__BWRAP_BIN": str(_flaky_bwrap(outside, marker, probe_only)),
        "WORKER_CLAUDE_BIN": str(claude),
    }.items():
        monkeypatch.setenv(key, value)
    namespaces_problem.cache_clear()
    return marker


def test_a_box_probe_that_fails_to_start_once_is_asked_again_not_refused(
    workspace: Path, outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The preflight's probe in the box is asked twice before saying no: its no is exit 78,
    which would stop `worker serve` for good over a loaded machine's hiccup. Failing twice
    is still said."""
    marker = _flaky_env(workspace, outside_tmp, True, monkeypatch)
    settings = load_settings(workspace)
    modes = load_modes(modes_path(settings.workspace, settings.modes_file)).modes
    mode = next(m for m in modes.values() if m.agent == "claude")
    assert preflight(settings, mode) is None
    assert marker.exists()  # it did fail once
    marker.write_text("always")  # the control
    failure = preflight(settings, mode)
    assert failure is not None and "cannot be started inside the sandbox" in failure.message


def test_bubblewraps_namespaces_failing_once_do_not_turn_the_box_off(
    workspace: Path, outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether bubblewrap can make its namespaces is asked twice before saying no: a no turns
    the box off for the run (`auto`) or refuses it (`required`)."""
    marker = _flaky_env(workspace, outside_tmp, False, monkeypatch)
    runtime, why = find_runtime(load_settings(workspace).sandbox)
    assert runtime is not None and runtime.name == "bwrap", why
    assert marker.exists()
    marker.write_text("always")  # the control
    namespaces_problem.cache_clear()
    runtime, why = find_runtime(load_settings(workspace).sandbox)
    assert runtime is None and "cannot make its namespaces" in why
