"""Maintenance checks the project in the project's own environment; a check that cannot run
is a set-up problem told once in words, never a task for the agent. Real git repositories and
real virtual environments in tmp folders, a stand-in `claude` that counts its calls."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.bot_api import WebhookReceiver
from worker.config import load_settings
from worker.run.runner import RunOptions, RunReport, run_once
from worker.sources.project_checks import cannot_run, detect_plan

from .conftest import FakeAgent, git, needs_posix, run_worker, state_of, write_message

pytestmark = needs_posix("a virtual environment's bin/ layout and /bin/sh")


@pytest.fixture(autouse=True)
def maintenance_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about checks that run, or cannot: maintenance is asked for here (by
    default it is off where the workspace has no checks it can run)."""
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "true")


@pytest.fixture
def hook() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver().start()
    yield server
    server.stop()


def _project(ws: Path, test_body: str = "def test_ok():\n    assert True\n") -> Path:
    """A Python project under git with one test file."""
    (ws / "tests").mkdir(parents=True, exist_ok=True)
    (ws / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n')
    (ws / "tests" / "test_demo.py").write_text(test_body)
    git(ws, "init", "-q")
    return ws


def _venv(ws: Path, *, with_pytest: bool) -> Path:
    """A real virtual environment `.venv` (no pip: fast). `with_pytest`: it sees this
    interpreter's packages through a .pth file, as if pytest were installed in it."""
    folder = ws / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    if with_pytest:
        [packages] = list(folder.glob("lib/python*/site-packages"))
        import pytest as installed

        (packages / "host.pth").write_text(str(Path(installed.__file__).parents[1]) + "\n")
    return folder


def _run(ws: Path, **options: object) -> RunReport:
    return run_once(load_settings(ws), RunOptions(**options))  # type: ignore[arg-type]


def _notify_to(ws: Path, hook: WebhookReceiver) -> None:
    (ws / "worker.toml").write_text(f'[notify.webhook]\nurl = "{hook.url}/"\n', encoding="utf-8")


def test_a_venv_without_pytest_is_told_once_and_no_agent_runs(
    workspace: Path, fake_claude: FakeAgent, hook: WebhookReceiver
) -> None:
    """The issue's first day: the project's .venv has no pytest. Old code ran worker's own
    `python -m pytest` and gave "No module named pytest" to the agent as tests to fix."""
    _project(workspace)
    _venv(workspace, with_pytest=False)
    _notify_to(workspace, hook)
    dry = run_worker(workspace, "run", "--dry-run")  # the hint comes before any spend
    assert "would run in the project's virtual environment .venv" in dry.stdout
    assert "this Python has no module pytest" in dry.stderr and "no agent would start" in dry.stderr

    first = _run(workspace)
    assert first.source == "fallback" and first.outcome.value == "failure"
    assert "MAINTENANCE_SETUP_PROBLEM" in first.reason_codes
    assert first.exit_code == 78  # the set-up to fix (EX_CONFIG), not a task that failed
    assert "no module pytest" in first.reason and ".venv" in first.reason
    assert fake_claude.calls == []  # no agent, not even a reviewer
    told = [body for body in hook.bodies() if "cannot run" in json.dumps(body)]
    assert len(told) == 1

    # Not retried every run: the next run passes over it, runs no check, says why.
    second = _run(workspace)
    assert second.outcome.value == "idle"
    assert not (state_of(workspace) / "logs" / f"run-{second.run_id}").exists()
    status = run_worker(workspace, "status")
    assert "maintenance cannot run its checks" in status.stderr
    assert "no module pytest" in status.stderr
    doctor = json.loads(run_worker(workspace, "doctor", "--json").stdout)
    words = [f["message"] for f in doctor["findings"] if f["check"] == "maintenance"]
    assert any(".venv" in w for w in words) and any("no module pytest" in w for w in words)

    # The project changes: tried again at once; the same problem is not told twice.
    (workspace / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "1"\n')
    third = _run(workspace)
    assert third.source == "fallback" and "SETUP_PROBLEM_KNOWN" in third.reason_codes
    assert [c for c in fake_claude.calls if c["argv"] != ["--version"]] == []  # doctor's asked
    assert len([b for b in hook.bodies() if "cannot run" in json.dumps(b)]) == 1


def test_checks_run_in_the_projects_venv_and_a_dry_run_says_so(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """The test passes only under the project's own interpreter; the old `python -m pytest`
    ran worker's, failed it, and called the agent."""
    _project(
        workspace,
        "import sys\nfrom pathlib import Path\n\n"
        "def test_runs_in_the_projects_venv():\n"
        "    here = Path(__file__).resolve().parents[1] / '.venv'\n"
        "    assert Path(sys.prefix).resolve() == here.resolve()\n",
    )
    venv = _venv(workspace, with_pytest=True)
    dry = run_worker(workspace, "run", "--dry-run")
    assert "would run in the project's virtual environment .venv" in dry.stdout
    assert f"{venv / 'bin' / 'python'} -m pytest -q" in dry.stdout
    report = _run(workspace)
    assert report.outcome.value == "success", report.reason
    assert "FALLBACK_CHECKS_PASSED" in report.reason_codes
    assert fake_claude.calls == []


def test_only_a_check_that_ran_and_failed_goes_to_the_agent(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    _project(
        workspace,
        "from pathlib import Path\n\n"
        "def test_fixed():\n"
        "    assert (Path(__file__).parents[1] / 'fixed.txt').exists(), 'not fixed yet'\n",
    )
    _venv(workspace, with_pytest=True)
    fake_claude.answers(
        {"status": "success", "reason": "fixed", "files": [{"path": "fixed.txt", "text": "x"}]}
    )
    report = _run(workspace)
    assert report.outcome.value == "success" and len(fake_claude.task_calls) == 1
    assert "not fixed yet" in fake_claude.task_calls[0]["stdin"]


def test_no_tests_collected_is_a_setup_problem(workspace: Path, fake_claude: FakeAgent) -> None:
    _project(workspace, "# no tests yet\n")
    _venv(workspace, with_pytest=True)
    report = _run(workspace)
    assert "MAINTENANCE_SETUP_PROBLEM" in report.reason_codes
    assert "collected no tests" in report.reason and fake_claude.calls == []


def test_a_missing_command_is_a_setup_problem(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_FALLBACK__TEST", '["no-such-test-runner-xyz --all"]')
    done = run_worker(workspace, "run", "--json")
    assert done.returncode == 78, done.stderr  # cron's mail says: fix the set-up
    report = json.loads(done.stdout)
    assert "MAINTENANCE_SETUP_PROBLEM" in report["reason_codes"]
    assert "not installed" in report["reason"] and fake_claude.calls == []


def test_a_tool_the_project_uses_but_is_missing_is_found_before_anything_runs(
    workspace: Path, fake_claude: FakeAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv.lock says uv; without `uv` on PATH the dry run says so, and the run starts nothing."""
    _project(workspace)
    (workspace / "uv.lock").write_text("version = 1\n")
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    plan = detect_plan(load_settings(workspace))
    assert plan.commands == ["uv run pytest -q"] and "`uv` is not on PATH" in (plan.problem or "")
    dry = run_worker(workspace, "run", "--dry-run")
    assert "`uv` is not on PATH" in dry.stderr and "no agent would start" in dry.stderr
    report = _run(workspace)
    assert "MAINTENANCE_SETUP_PROBLEM" in report.reason_codes and fake_claude.calls == []
    assert not (state_of(workspace) / "logs" / f"run-{report.run_id}").exists()


def test_detection_order_and_configured_commands(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(workspace)
    _venv(workspace, with_pytest=False)
    (workspace / "Makefile").write_text("test:\n\techo ok\n")
    plan = detect_plan(load_settings(workspace))
    assert plan.environment.startswith("the project's virtual environment .venv")
    (workspace / "pyproject.toml").unlink()  # no Python marker: the Makefile's test target
    (workspace / "tests" / "test_demo.py").unlink()
    assert detect_plan(load_settings(workspace)).commands == ["make test"]
    (workspace / "Makefile").write_text("build:\n\techo ok\n")  # no test target: nothing
    (workspace / "package.json").write_text(
        '{"scripts": {"test": "echo \\"Error: no test specified\\" && exit 1"}}'
    )
    npm = detect_plan(load_settings(workspace))
    assert npm.commands[-1] == "npm test" and "no test script" in (npm.problem or "")
    monkeypatch.setenv("WORKER_FALLBACK__TEST", '["make check"]')
    configured = detect_plan(load_settings(workspace))
    assert configured.commands == ["make check"] and configured.problem is None


def test_detection_reads_the_trees_files_as_data_never_through_a_link(workspace: Path) -> None:
    """The agent writes the tree: a Makefile or a package.json that is a link to a file
    elsewhere (the operator's) is not read through; what it says decides nothing."""
    outside = workspace.parent / "operators-files"
    outside.mkdir()
    (outside / "Makefile").write_text("test:\n\techo ok\n")
    (outside / "package.json").write_text('{"scripts": {"test": "jest"}}')
    (workspace / "Makefile").symlink_to(outside / "Makefile")
    assert detect_plan(load_settings(workspace)).commands == []
    (workspace / "package.json").symlink_to(outside / "package.json")
    plan = detect_plan(load_settings(workspace))
    assert plan.commands[-1] == "npm test" and "no test script" in (plan.problem or "")


def test_a_venv_whose_interpreter_is_gone_is_a_setup_problem(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """A .venv made by a Python since removed: its bin/python is a dangling link."""
    _project(workspace)
    venv = _venv(workspace, with_pytest=False)
    python = venv / "bin" / "python"
    python.unlink()
    python.symlink_to(workspace / "removed-python3")
    report = _run(workspace)
    assert "MAINTENANCE_SETUP_PROBLEM" in report.reason_codes
    assert "no working interpreter" in report.reason and fake_claude.calls == []


def test_cannot_run_reads_the_interpreters_and_shells_words() -> None:
    missing = "/p/.venv/bin/python: No module named pytest\n"
    assert cannot_run("/p/.venv/bin/python -m pytest -q", 1, missing, own_env=True)
    # A test that imports a module the agent renamed is a failure to fix, in the project's env.
    failing = "E   ModuleNotFoundError: No module named 'app.old'\n"
    assert cannot_run("python -m pytest -q", 2, failing, own_env=True) is None
    assert cannot_run("python -m pytest -q", 2, failing, own_env=False)
    assert cannot_run("cargo test", 127, "sh: 1: cargo: not found\n", own_env=True)
    assert cannot_run("npm test", 1, 'npm ERR! Missing script: "test"\n', own_env=True)
    make = "sh: 1: tox: not found\nmake: *** [Makefile:2: test] Error 127\n"
    assert "not installed" in (cannot_run("make test", 2, make, own_env=True) or "")
    tox = "py38: InterpreterNotFound: python3.8\n  py38: FAIL code 1 (0.01 seconds)\n"
    assert "interpreter it needs is missing" in (cannot_run("tox", 1, tox, own_env=True) or "")
    assert cannot_run("make test", 1, "test_x.py F\n1 failed\n", own_env=True) is None


def test_check_log_holds_stderr_too(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`check-<K>.log` was empty when a check wrote to stderr (the prompt had its output)."""
    command = "test -e fixed || { echo to-stdout; echo to-stderr >&2; exit 3; }"
    monkeypatch.setenv("WORKER_FALLBACK__TEST", json.dumps([command]))
    fake_claude.answers({"status": "success", "files": [{"path": "fixed", "text": ""}]})
    report = _run(workspace)
    assert report.outcome.value == "success" and len(fake_claude.task_calls) == 1
    log = (state_of(workspace) / "logs" / f"run-{report.run_id}" / "check-1.log").read_text()
    assert "to-stdout" in log and "to-stderr" in log
    assert "to-stderr" in fake_claude.task_calls[0]["stdin"]


def test_a_dry_run_warns_that_the_agent_cli_is_missing(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    monkeypatch.delenv("WORKER_CLAUDE_BIN", raising=False)
    empty = tmp_path / "no-claude-here"
    empty.mkdir()
    write_message(workspace, "msg-1")
    dry = run_worker(workspace, "run", "--dry-run", env={"PATH": str(empty)})
    assert dry.returncode == 0, dry.stderr
    assert "agent command: claude" in dry.stdout
    assert "Claude Code cannot start: `claude` was not found on PATH" in dry.stderr
    as_json = json.loads(
        run_worker(workspace, "run", "--dry-run", "--json", env={"PATH": str(empty)}).stdout
    )
    assert any("cannot start" in note for note in as_json["notes"])


def test_reviewers_are_off_until_configured(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Old default: a style reviewer due after every task (interval 1) called a model unasked."""
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    monkeypatch.setenv("WORKER_REVIEW__STYLE__INTERVAL", "1")
    write_message(workspace, "msg-1")
    dry = run_worker(workspace, "run", "--dry-run")
    assert "reviewers: off" in dry.stdout
    assert _run(workspace).outcome.value == "success"
    assert len(fake_claude.calls) == len(fake_claude.task_calls) == 1
    doctor = json.loads(run_worker(workspace, "doctor", "--json").stdout)
    spend = [f["message"] for f in doctor["findings"] if f["check"] == "spend"]
    assert any(m.startswith("reviewers: off") for m in spend)

    monkeypatch.setenv("WORKER_REVIEW__REVIEWERS", "true")  # configured: they run, capped
    write_message(workspace, "msg-2")
    assert "style at most $0.50" in run_worker(workspace, "run", "--dry-run").stdout
    assert _run(workspace).outcome.value == "success"
    model_calls = [c for c in fake_claude.calls if c["argv"] != ["--version"]]  # not doctor's
    assert len(fake_claude.task_calls) == 2 and len(model_calls) == 3
