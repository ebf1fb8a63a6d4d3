"""Issue 39: a GitHub task delivered as configured and carried to its end, against the fake
GitHub, the fake claude and real git.

Delivery is a setting per source (a pull request from a worktree by default for GitHub, never
the operator's checkout), shown by `schedule`, `doctor` and the dry run; a merge ends the task
in the run that sees it, recorded with the task's totals and its branch deleted; past the
follow-up limit `/approve` grants more rounds, `/reject` starts no agent and the merge label
still merges; a pull request whose checks run or failed is looked at every run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conftest import FakeAgent, git
from tests.fakes.github_server import FakeGitHub, settings_for, user
from tests.git_projects import project_with_origin
from worker.cli.app import app
from worker.config import load_settings
from worker.errors import ConfigError
from worker.run.runner import RunOptions, run_once
from worker.state.store import Store
from worker.waits.state import wait_state_files

REPO = "acme/app"
TASK = f"{REPO}#7"
BRANCH = "worker/acme-app-7"


@pytest.fixture
def server(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_issue(
        REPO, 7, title="Fix the parser", labels=("roo-schedulable",), body="Agent: Any\n\nFix it."
    )
    return fake_github


def _toml(ws: Path, server: FakeGitHub, **github: Any) -> None:
    section = settings_for(server, **github)
    if "delivery" not in github and "open_pr" not in github:
        section.pop("delivery")  # the default delivery, as a user's worker.toml has it
    # worker pushes to the URL it is given, never to a remote of `.git/config`'s
    section.setdefault("remote", str(ws.parent / "origin.git"))
    lines = ["[github]"] + [f"{key} = {json.dumps(value)}" for key, value in section.items()]
    lines += ["[waits]", "recheck_interval_s = 3600", "[review]", "enabled = false"]
    lines += ["[fallback]", "enabled = false"]
    (ws / "worker.toml").write_text("\n".join(lines) + "\n")


def _repo(tmp_path: Path, server: FakeGitHub, **github: Any) -> Path:
    """A project with an `origin` to push to; worker.toml names no delivery unless asked."""
    ws = project_with_origin(tmp_path, "ws", {"README.md": "hello\n"})
    _toml(ws, server, **github)
    return ws


def _run(ws: Path) -> Any:
    return run_once(load_settings(ws), RunOptions())  # no flag: worker.toml decides


def _fix(fake_claude: FakeAgent, reason: str, text: str) -> None:
    fake_claude.answers(
        {
            "status": "success",
            "reason": reason,
            "files": [{"path": "parser.py", "text": text}],
        }
    )


def _open(ws: Path, server: FakeGitHub, fake_claude: FakeAgent) -> dict[str, Any]:
    _fix(fake_claude, "Parser fixed for empty input", "def parse(): return 1\n")
    report = _run(ws)
    assert (report.outcome.value, report.task_id) == ("waiting", TASK), report.reason
    pull = server.pull_of(REPO, 1000)
    assert pull is not None and pull["head"]["ref"] == BRANCH
    return pull


def _wait(ws: Path) -> dict[str, Any]:
    (path,) = wait_state_files(load_settings(ws).wait_states)
    return json.loads(path.read_text(encoding="utf-8"))


def _green_approved_labelled(server: FakeGitHub, pull: dict[str, Any]) -> None:
    server.set_checks(REPO, pull["head"]["sha"], runs=[("tests", "completed", "success", "")])
    server.add_review(REPO, 1000, "maintainer", "APPROVED")
    server.label_pull(REPO, 1000, "worker:merge", by="maintainer")


def test_a_github_task_becomes_a_pull_request_by_default_and_never_edits_the_checkout(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    """No `--use-worktree`, no `open_pr`: the default delivery of GitHub's tasks opens a pull
    request from a worktree, committed by the token's user at GitHub's noreply address, with
    a subject and a body from the agent's summary and `Closes #7`."""
    ws = _repo(tmp_path, server)
    pull = _open(ws, server, fake_claude)
    assert not (ws / "parser.py").exists() and git(ws, "status", "--porcelain") == ""
    origin = tmp_path / "origin.git"
    bot = user("worker-bot")
    author = git(origin, "log", "-1", "--format=%an <%ae>|%s", BRANCH).strip()
    assert author == (
        f"worker-bot <{bot['id']}+worker-bot@users.noreply.127.0.0.1>|Parser fixed for empty input"
    )
    body = pull["body"]
    assert body.startswith("**Summary:** Parser fixed for empty input")
    assert "parser.py" in body and "**Cost:**" in body and "Closes #7" in body


def test_commit_author_setting_names_the_author(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    ws = _repo(tmp_path, server, commit_author="Ada Bot <ada@example.com>")
    _open(ws, server, fake_claude)
    found = git(tmp_path / "origin.git", "log", "-1", "--format=%an <%ae>", BRANCH).strip()
    assert found == "Ada Bot <ada@example.com>"


def test_a_commit_author_not_of_the_form_name_address_is_refused(
    tmp_path: Path, server: FakeGitHub
) -> None:
    ws = _repo(tmp_path, server, commit_author="just a name")
    with pytest.raises(ConfigError, match="commit_author"):
        load_settings(ws)


def test_a_pull_request_delivery_outside_git_takes_no_task_and_says_what_to_do(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    """The default delivery needs a repository: in a plain folder no task is claimed, no
    agent starts, and the error names the setting that would work in place."""
    ws = tmp_path / "plain"
    ws.mkdir()
    _toml(ws, server)
    with pytest.raises(ConfigError, match=r'delivery = "in_place"'):
        _run(ws)
    assert fake_claude.task_calls == []
    assert "worker:in-progress" not in server.labels_of(REPO, 7)


def test_in_place_delivery_is_a_setting(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    ws = _repo(tmp_path, server, delivery="in_place")
    fake_claude.answers({"status": "success", "reason": "done"})
    report = _run(ws)
    assert report.outcome.value == "success" and report.branch is None
    assert Path(fake_claude.task_calls[0]["cwd"]) == ws
    assert server.repos[REPO]["pulls"] == []


def test_schedule_doctor_and_the_dry_run_show_each_sources_delivery(
    tmp_path: Path, server: FakeGitHub, cli: CliRunner
) -> None:
    ws = _repo(tmp_path, server)
    said = "github: as a pull request from a worktree"
    cron = cli.invoke(app, ["schedule", "cron", "-w", str(ws)])
    assert cron.exit_code == 0 and f"# Delivery of {said}" in cron.stdout
    assert "# Delivery of inbox: in place" in cron.stdout
    doctor = cli.invoke(app, ["doctor", "-w", str(ws), "--json"])
    findings = [f for f in json.loads(doctor.stdout)["findings"] if f["check"] == "delivery"]
    assert [f["status"] for f in findings] == ["ok", "ok"]
    assert any(said in f["message"] for f in findings)
    dry = cli.invoke(app, ["run", "--dry-run", "--json", "-w", str(ws)])
    assert f"delivery of {said}" in " ".join(json.loads(dry.stdout)["notes"])
    # `open_pr = false`, the older spelling, is a branch without a pull request.
    _toml(ws, server, open_pr=False)
    cron = cli.invoke(app, ["schedule", "cron", "-w", str(ws)])
    assert "# Delivery of github: on a branch worker/<task> in a worktree" in cron.stdout


def test_the_merge_ends_the_task_in_the_run_that_sees_it_with_its_totals(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent, cli: CliRunner
) -> None:
    """The run that merges says so (its outcome success, not idle), `log` and `show` say
    merged, the issue's final comment has the task's totals, and no worker/* branch is left
    on the remote or in the workspace."""
    ws = _repo(tmp_path, server)
    pull = _open(ws, server, fake_claude)
    _green_approved_labelled(server, pull)
    report = _run(ws)
    assert pull["merged"]
    assert (report.outcome.value, report.task_id) == ("success", TASK)
    assert "PR_ENDED" in report.reason_codes and "merged by worker" in report.reason
    assert "in all 1 iteration(s) over 1 run(s)" in report.reason
    with Store(load_settings(ws).db_path) as store:
        last = store.recent_runs(1)[0]
    assert (last["task_id"], last["outcome"], last["branch"]) == (TASK, "success", BRANCH)
    shown = cli.invoke(app, ["show", TASK, "-w", str(ws)])
    assert "success: pull request #1000 merged by worker" in shown.stdout
    logged = cli.invoke(app, ["log", "-w", str(ws)])
    assert "merged by worker" in logged.stdout
    body = server.comments_of(REPO, 7)[0]["body"]
    assert "| Iterations | 1 |" in body and f"| Branch | `{BRANCH}` |" in body
    assert "| Pull request | #1000 https://github.com/acme/app/pull/1000 |" in body
    assert "Duration | 0 s" not in body and "worker:done" in server.labels_of(REPO, 7)
    assert git(tmp_path / "origin.git", "branch", "--list", "worker/*") == ""
    assert git(ws, "branch", "--list", "worker/*") == ""


def test_a_merge_by_a_person_ends_the_task_and_a_later_cancel_keeps_it_merged(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent, cli: CliRunner
) -> None:
    """`worker cancel` of a task whose pull request a person merged records the merge (a
    success, worker:done), never a failure."""
    ws = _repo(tmp_path, server)
    _open(ws, server, fake_claude)
    assert _run(ws).task_id is None  # looked at once: open; the next look is in an hour
    server.close_pull(REPO, 1000, "maintainer", merged=True)
    cancelled = cli.invoke(app, ["cancel", TASK, "-w", str(ws)])
    assert cancelled.exit_code == 0, cancelled.output
    _run(ws)
    labels = server.labels_of(REPO, 7)
    assert "worker:done" in labels and "worker:failed" not in labels
    body = server.comments_of(REPO, 7)[0]["body"]
    assert "success" in body and "merged by maintainer before the cancel order" in body
    assert wait_state_files(load_settings(ws).wait_states) == []


def _past_the_limit(tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent) -> Path:
    """max_follow_ups = 1: one fix round, then its check fails again and a person decides."""
    ws = _repo(tmp_path, server, max_follow_ups=1)
    pull = _open(ws, server, fake_claude)
    server.set_checks(REPO, pull["head"]["sha"], runs=[("tests", "completed", "failure", "E1")])
    _fix(fake_claude, "Round one", "def parse(): return 2\n")
    assert _run(ws).task_id == TASK and len(fake_claude.task_calls) == 2
    assert _wait(ws)["sourceRef"]["prHeld"] is True
    pull["head"]["sha"] = "b" * 40  # the fix's push is the new head; its check fails too
    server.set_checks(REPO, pull["head"]["sha"], runs=[("tests", "completed", "failure", "E2")])
    return ws


def test_past_the_limit_nothing_resumes_until_a_person_answers_and_the_issue_says_how(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    ws = _past_the_limit(tmp_path, server, fake_claude)
    report = _run(ws)
    assert report.task_id is None and len(fake_claude.task_calls) == 2
    body = server.comments_of(REPO, 7)[0]["body"]
    why = body.split("**Why:**", 1)[1].split("\n\n")[0]  # in the open, not in a <details>
    assert "`/approve`" in why and "`/reject`" in why and "1 more round(s)" in why


def test_approve_past_the_limit_grants_more_rounds(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    ws = _past_the_limit(tmp_path, server, fake_claude)
    _wait_due(ws)
    server.add_comment(REPO, 7, "/approve one more try", login="maintainer")
    _fix(fake_claude, "Round two", "def parse(): return 3\n")
    report = _run(ws)
    assert report.task_id == TASK and len(fake_claude.task_calls) == 3
    prompt = fake_claude.task_calls[-1]["stdin"]
    assert "maintainer approved 1 more round(s)" in prompt and "one more try" in prompt
    assert "E2" in prompt
    wait = _wait(ws)
    assert (wait["sourceRef"]["prLimit"], wait["sourceRef"]["prHeld"]) == (2, True)


def test_reject_past_the_limit_starts_no_agent_and_leaves_the_pull_request_open(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    ws = _past_the_limit(tmp_path, server, fake_claude)
    _wait_due(ws)
    server.add_comment(REPO, 7, "/reject", login="maintainer")
    report = _run(ws)
    assert (report.outcome.value, report.task_id) == ("cancelled", TASK)
    assert len(fake_claude.task_calls) == 2
    assert server.pull_of(REPO, 1000)["state"] == "open"  # type: ignore[index]
    assert "no longer follows pull request #1000" in server.comments_of(REPO, 7)[0]["body"]


def test_approve_on_the_pull_request_grants_more_rounds_too(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    """A maintainer reviewing the pull request answers in its conversation, not on the
    issue: the same `/approve`, read from there."""
    ws = _past_the_limit(tmp_path, server, fake_claude)
    _wait_due(ws)
    server.comment_on_pull(REPO, 1000, "/approve try the v2 parser", login="maintainer")
    _fix(fake_claude, "Round two", "def parse(): return 3\n")
    report = _run(ws)
    assert report.task_id == TASK and len(fake_claude.task_calls) == 3
    assert "try the v2 parser" in fake_claude.task_calls[-1]["stdin"]
    assert _wait(ws)["sourceRef"]["prLimit"] == 2


def test_the_first_answer_wins_wherever_it_was_given(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    """`/reject` on the pull request, then `/approve` on the issue: the earlier one decides
    (no agent starts); an answer by someone without write access counts for nothing."""
    ws = _past_the_limit(tmp_path, server, fake_claude)
    _wait_due(ws)
    server.comment_on_pull(REPO, 1000, "/approve", login="passer-by")
    server.comment_on_pull(REPO, 1000, "/reject not this way", login="maintainer")
    server.add_comment(REPO, 7, "/approve", login="maintainer", age_s=-2)  # 2 s later
    report = _run(ws)
    assert (report.outcome.value, report.task_id) == ("cancelled", TASK)
    assert len(fake_claude.task_calls) == 2


def test_the_merge_label_merges_past_the_limit(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    ws = _past_the_limit(tmp_path, server, fake_claude)
    pull = server.pull_of(REPO, 1000)
    assert pull is not None
    _wait_due(ws)
    _green_approved_labelled(server, pull)
    report = _run(ws)
    assert pull["merged"] and report.outcome.value == "success"
    assert len(fake_claude.task_calls) == 2


def _wait_due(ws: Path) -> None:
    """A person's answer is looked for at the recheck interval (an hour here): as if it
    had passed."""
    with Store(load_settings(ws).db_path) as store:
        store.db.execute("UPDATE wait_checks SET checked_at = 0")
        store.db.commit()


def test_checks_running_or_failed_are_looked_at_every_run_and_said(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent, cli: CliRunner
) -> None:
    """recheck_interval_s is an hour, yet the failing check is seen at the next run (no
    rate limit spent while nothing changed), and the runs say what they saw."""
    ws = _repo(tmp_path, server)
    pull = _open(ws, server, fake_claude)
    server.set_checks(REPO, pull["head"]["sha"], runs=[("tests", "in_progress", None, "")])
    _wait_due(ws)
    idle = _run(ws)
    assert idle.outcome.value == "idle"
    assert idle.notes == [f"{TASK}: pull request #1000: checks running: tests"]
    costed = server.costed
    assert _run(ws).task_id is None and server.costed == costed  # unchanged: 304s only
    why = cli.invoke(app, ["why", "-w", str(ws)])
    assert "it looked at acme/app#7: pull request #1000: checks running: tests" in why.stdout
    server.set_checks(REPO, pull["head"]["sha"], runs=[("tests", "completed", "failure", "E")])
    _fix(fake_claude, "Test fixed", "def parse(): return 2\n")
    resumed = _run(ws)
    assert resumed.task_id == TASK and len(fake_claude.task_calls) == 2
    assert f"{TASK}: pull request #1000: checks failed: tests; resuming the task" in resumed.notes


def test_the_agents_question_is_in_the_open_with_how_to_answer(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    """A task that waits for a person shows the agent's question in the status comment,
    outside the collapsed last words, with `/approve` and `/reject` named."""
    ws = _repo(tmp_path, server, delivery="in_place")
    fake_claude.answers(
        {
            "status": "wait",
            "reason": "two ways to fix it",
            "wait_for": "Should empty input return 0 or raise ValueError?",
            "resume_when": "user_approval",
        }
    )
    assert _run(ws).outcome.value == "waiting"
    body = server.comments_of(REPO, 7)[0]["body"]
    shown = body.split("<details>", 1)[0]
    assert "❓ **The agent asks:** Should empty input return 0 or raise ValueError?" in shown
    assert "comment `/approve` on this issue" in shown and "`/reject` to stop it" in shown


def test_each_round_of_fixes_is_answered_on_the_pull_request(
    tmp_path: Path, server: FakeGitHub, fake_claude: FakeAgent
) -> None:
    """After a review round, worker says on the pull request what changed and which review
    and comments it addressed (once, however often the report is retried)."""
    ws = _repo(tmp_path, server)
    _open(ws, server, fake_claude)
    server.add_review(REPO, 1000, "maintainer", "CHANGES_REQUESTED", "Handle empty input.")
    server.add_review_comment(REPO, 1000, "maintainer", "parser.py", 1, "Return 0 here.")
    _wait_due(ws)
    _fix(fake_claude, "Empty input returns 0", "def parse(s=''): return 0\n")
    assert _run(ws).task_id == TASK
    pull = server.pull_of(REPO, 1000)
    assert pull is not None
    (reply,) = pull["_conversation"]
    text = reply["body"]
    assert "pushed round 1 of fixes" in text and "**What changed:** Empty input returns 0" in text
    assert "- Review by maintainer (changes_requested): Handle empty input." in text
    assert "- Comment by maintainer on parser.py:1: Return 0 here." in text
