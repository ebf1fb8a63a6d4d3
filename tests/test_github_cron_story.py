"""Issue 39's acceptance, end to end: the maintainer's day with only `worker.toml` and the line
`worker schedule cron` prints, run as cron runs it (`env -i`, a HOME of its own, /usr/bin:/bin,
the token from the crontab's environment line).

A labelled issue becomes a pull request from a worktree (the checkout untouched); its failing
check is fixed at the next run; a reviewer's request is addressed; the merge label merges it;
`log`, `show` and the issue say it ended merged with its totals; no worker/* branch is left.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

import worker
from tests.conftest import FAKE_CLAUDE, FakeAgent, git, needs_posix
from tests.fakes.github_server import FakeGitHub, settings_for
from tests.git_projects import project_with_origin
from worker.cli.app import app
from worker.config import load_settings

REPO = "acme/app"
TASK = f"{REPO}#7"
BRANCH = "worker/acme-app-7"


def _project(tmp_path: Path, server: FakeGitHub) -> Path:
    """A project with an origin to push to and a worker.toml naming no delivery at all."""
    ws = project_with_origin(tmp_path, "project", {"parser.py": "def parse(): return 0\n"})
    section = settings_for(server)
    section.pop("delivery")  # the user's worker.toml: GitHub's default delivery
    section["remote"] = str(tmp_path / "origin.git")  # pushed to by URL, never `.git/config`'s
    lines = ["[github]"] + [f"{key} = {json.dumps(value)}" for key, value in section.items()]
    lines += ["[review]", "enabled = false", "[fallback]", "enabled = false"]
    (ws / "worker.toml").write_text("\n".join(lines) + "\n")
    return ws


def _standalone(agent: FakeAgent) -> None:
    """The fake claude with its script and log written into it: cron passes no FAKE_* variable."""
    agent.path.write_text(
        f"#!/bin/sh\nFAKE_CLAUDE_SCRIPT={shlex.quote(str(agent.script))} "
        f"FAKE_CLAUDE_LOG={shlex.quote(str(agent.log))} "
        f'exec "{sys.executable}" {shlex.quote(str(FAKE_CLAUDE))} "$@"\n'
    )


def _answer(agent: FakeAgent, calls: int, reason: str, text: str) -> None:
    """The answer of the agent's next call (earlier calls keep theirs)."""
    done = [{"status": "success", "reason": "-"}] * calls
    change = {"status": "success", "reason": reason, "files": [{"path": "parser.py", "text": text}]}
    agent.answers(*done, change)


class Cron:
    def __init__(self, cli: CliRunner, ws: Path, home: Path) -> None:
        printed = cli.invoke(app, ["schedule", "cron", "-w", str(ws)])
        assert printed.exit_code == 0, printed.output
        self.comments = [line for line in printed.stdout.splitlines() if line.startswith("#")]
        (job,) = [line for line in printed.stdout.splitlines() if line and line[0] != "#"]
        self.command = job.split(None, 5)[5].replace("\\%", "%")  # after cron's time fields
        self.home = home
        home.mkdir()

    def tick(self) -> None:
        env = ["env", "-i", f"HOME={self.home}", "PATH=/usr/bin:/bin"]
        token = ["GITHUB_TOKEN=test-token-abc"]  # the crontab's environment line
        # The worker under test, as the installed one would be (an editable install may point
        # at another checkout of it).
        code = [f"PYTHONPATH={Path(worker.__file__).resolve().parents[1]}"]
        proc = subprocess.run(
            [*env, *token, *code, "/bin/sh", "-c", self.command],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, (proc.stdout, proc.stderr)


def _json(cli: CliRunner, *args: str) -> Any:
    result = cli.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@needs_posix("cron's shell and env -i")
def test_a_labelled_issue_goes_to_a_merged_pull_request_under_cron(
    cli: CliRunner, fake_github: FakeGitHub, fake_claude: FakeAgent, tmp_path: Path
) -> None:
    server = fake_github
    server.add_issue(
        REPO, 7, title="Fix the parser", labels=("roo-schedulable",), body="Agent: Any\n\nFix it."
    )
    ws = _project(tmp_path, server)
    _standalone(fake_claude)
    cron = Cron(cli, ws, tmp_path / "cron-home")
    assert "# Delivery of github: as a pull request from a worktree (branch worker/<task>)" in (
        cron.comments
    )
    origin = tmp_path / "origin.git"

    # 1. The labelled issue becomes a pull request; the checkout is left alone.
    _answer(fake_claude, 0, "Parser returns 1", "def parse(): return 1\n")
    cron.tick()
    pull = server.pull_of(REPO, 1000)
    assert pull is not None and pull["head"]["ref"] == BRANCH and "Closes #7" in pull["body"]
    assert (ws / "parser.py").read_text() == "def parse(): return 0\n"
    assert git(ws, "status", "--porcelain") == ""

    # 2. Its check fails: the next run resumes the agent with the failure; the fix is pushed.
    server.set_checks(REPO, pull["head"]["sha"], runs=[("tests", "completed", "failure", "E1")])
    _answer(fake_claude, 1, "Parser returns 2 as the test expects", "def parse(): return 2\n")
    cron.tick()
    assert "E1" in fake_claude.task_calls[1]["stdin"]
    assert git(origin, "show", f"{BRANCH}:parser.py") == "def parse(): return 2\n"
    pull["head"]["sha"] = "2" * 40  # the pushed fix is the new head; CI passes on it
    server.set_checks(REPO, pull["head"]["sha"], runs=[("tests", "completed", "success", "")])

    # 3. A reviewer asks for a change: addressed at the next run.
    server.add_review(REPO, 1000, "maintainer", "CHANGES_REQUESTED", "Handle empty input.")
    _answer(fake_claude, 2, "Empty input handled", "def parse(s=''): return 2 if s else 0\n")
    cron.tick()
    assert "Handle empty input." in fake_claude.task_calls[2]["stdin"]
    pull["head"]["sha"] = "3" * 40
    server.set_checks(REPO, pull["head"]["sha"], runs=[("tests", "completed", "success", "")])

    # 4. Approved and labelled: the next run merges it, and that run says so.
    server.add_review(REPO, 1000, "maintainer", "APPROVED")
    server.label_pull(REPO, 1000, "worker:merge", by="maintainer")
    cron.tick()
    assert pull["merged"] and len(fake_claude.task_calls) == 3

    runs = _json(cli, "log", "-w", str(ws))
    rows = runs["runs"] if isinstance(runs, dict) else runs
    assert (rows[0]["task"], rows[0]["outcome"]) == (TASK, "success")
    assert "NOTHING_TO_DO" not in rows[0]["decision_codes"] + rows[0]["outcome_codes"]
    assert "pull request #1000 merged by worker" in rows[0]["reason"]
    assert "in all 3 iteration(s) over 3 run(s), $0.0300" in rows[0]["reason"]
    shown = cli.invoke(app, ["show", TASK, "-w", str(ws)])
    assert "success: pull request #1000 merged by worker" in shown.stdout
    body = server.comments_of(REPO, 7)[0]["body"]
    assert "✅ success" in body and "| Iterations | 3 |" in body and f"`{BRANCH}`" in body
    assert "| Pull request | #1000" in body and "worker:done" in server.labels_of(REPO, 7)
    assert git(origin, "branch", "--list", "worker/*") == ""
    assert git(ws, "branch", "--list", "worker/*") == ""
    state = load_settings(ws).state
    assert not (tmp_path / "cron-home" / ".local").exists()  # one state folder
    said = (state / "logs" / "cron-run.log").read_text()
    assert "seen: acme/app#7: pull request #1000: checks failed: tests; resuming" in said
    assert (
        said.rstrip()
        .splitlines()[-1]
        .startswith("success: acme/app#7: pull request #1000 merged by worker")
    )
