"""Maintenance fits the workspace: off by default where the workspace has no checks it can run
(said once by `doctor`, never a run that can only fail); never a branch or a commit when it
changed nothing; a check that cannot run is a set-up problem, not among the last failures.
Real git repositories in tmp folders, the real `worker` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.config import load_settings
from worker.operator.status import status
from worker.run.runner import RunOptions, RunReport, run_once
from worker.sources.fallback import policy

from .conftest import git, needs_posix, run_worker

pytestmark = [
    needs_posix("/bin/sh runs the configured checks"),
    pytest.mark.usefixtures("fake_claude"),  # the agent could start (it is never needed)
]


@pytest.fixture(autouse=True)
def no_reviewers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")


def _repo(ws: Path, toml: str = "") -> Path:
    """A Python project under git (one commit) with no environment of its own."""
    (ws / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "0"\n')
    (ws / "worker.toml").write_text(toml)
    git(ws, "init", "-q", "-b", "main")
    git(ws, "config", "user.email", "t@example.com")
    git(ws, "config", "user.name", "t")
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "init")
    return ws


def _run(ws: Path) -> RunReport:
    return run_once(load_settings(ws), RunOptions(use_worktree=True))


def _branches(ws: Path) -> list[str]:
    return git(ws, "branch", "--list", "--format=%(refname:short)").split()


def test_off_by_default_where_the_workspace_has_no_checks_it_can_run(workspace: Path) -> None:
    """A Python project without its own environment: no maintenance run, no branch, and
    `doctor` says so once, as a fact (not a problem to fix)."""
    ws = _repo(workspace)
    said = policy(load_settings(ws))
    assert not said.on and "no checks worker can run" in said.why
    report = _run(ws)
    assert report.outcome.value == "idle" and report.source is None
    assert _branches(ws) == ["main"]
    doctor = run_worker(ws, "doctor", "--json")
    findings = json.loads(doctor.stdout)["findings"]
    told = [f for f in findings if f["check"] == "maintenance"]
    assert len(told) == 1 and told[0]["status"] == "ok"
    assert "maintenance is off: this workspace has no checks worker can run" in told[0]["message"]
    assert "[fallback] test" in told[0]["message"]  # and how to turn it on


def test_configured_checks_turn_it_on_and_a_clean_pass_leaves_no_branch(workspace: Path) -> None:
    ws = _repo(workspace, '[fallback]\ntest = ["true"]\n')
    assert policy(load_settings(ws)).on
    report = _run(ws)
    assert (report.source, report.outcome.value) == ("fallback", "success"), report.reason
    assert _branches(ws) == ["main"]  # no worker/maintenance-<date>
    assert git(ws, "rev-list", "--count", "--all").strip() == "1"  # no commit either
    assert not (load_settings(ws).state / "worktrees").exists() or not any(
        (load_settings(ws).state / "worktrees").iterdir()
    )


def test_a_branch_with_work_on_it_is_kept(workspace: Path) -> None:
    """The checks write a file (as an agent's fix would): that work is committed and its
    branch stays."""
    ws = _repo(workspace, '[fallback]\ntest = ["echo fixed > made-by-check.txt"]\n')
    report = _run(ws)
    assert report.outcome.value == "success", report.reason
    [kept] = [b for b in _branches(ws) if b.startswith("worker/maintenance-")]
    assert "made-by-check.txt" in git(ws, "show", "--stat", kept)


def test_a_check_that_cannot_run_is_a_set_up_problem_not_a_last_failure(
    workspace: Path,
) -> None:
    ws = _repo(workspace, '[fallback]\ntest = ["no-such-program-xyz --check"]\n')
    report = _run(ws)
    assert "MAINTENANCE_SETUP_PROBLEM" in report.reason_codes
    assert _branches(ws) == ["main"]
    shown = status(load_settings(ws), with_queue=False)
    assert shown["failures"] == []  # not a task failure
    assert "no-such-program-xyz" in shown["maintenance_problem"]["problem"]


def test_explicitly_off_is_said_as_such(workspace: Path) -> None:
    ws = _repo(workspace, '[fallback]\nenabled = false\ntest = ["true"]\n')
    said = policy(load_settings(ws))
    assert not said.on and said.why == "maintenance is off ([fallback] enabled = false)"
    assert _run(ws).source is None
