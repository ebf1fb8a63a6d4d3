"""What each iteration's prompt carries: the briefing (the task, the knowledge and directives,
the STATUS instructions) at the first prompt of a session or a mode, and only what is new when
the agent CLI resumes a session that holds it (issue 32: pay once for what the session holds).
The agent is the fake `claude` printing real stream-json; tests/test_realcli_claude.py does the
same with the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import FakeAgent, needs_posix, write_message
from worker.cli.app import app
from worker.config import load_settings
from worker.models import Task
from worker.review import db
from worker.review import directives as queue
from worker.run.prompt import PromptParts, build_prompt
from worker.run.runner import RunOptions, RunReport, run_once
from worker.state.store import Store
from worker.status import STATUS_INSTRUCTIONS, STATUS_REMINDER, parse_status

BODY = "Please do the thing."  # write_message's body
INSTRUCTIONS = "=== AGENT STATUS ==="


@pytest.fixture(autouse=True)
def _only_the_task(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")


def run(ws: Path) -> RunReport:
    return run_once(load_settings(ws), RunOptions())


def prompts(fake: FakeAgent) -> list[str]:
    return [call["stdin"] for call in fake.task_calls]


def resumed(fake: FakeAgent) -> list[bool]:
    return ["--resume" in call["argv"] for call in fake.task_calls]


def test_a_follow_up_carries_only_what_is_new() -> None:
    """Pure: the follow-up has no task, no sections, no instructions and no quoted answer;
    it has the new checks, the changed sections, the answer a wait brought and the notes."""
    task = Task("t1", "inbox", "Fix the parser", body="the secret body")
    parts = PromptParts(
        task=task,
        mode="m",
        iteration=2,
        max_iterations=5,
        previous_output="my long previous answer",
        steering=["[SUPERVISOR] you repeat yourself"],
        sections=["## PROJECT KNOWLEDGE\nrule one"],
        resume_answer="yes, go",
        checks_report="$ make test\nFAILED",
        changed_sections=["## DIRECTIVES NEW SINCE YOU STARTED\n- D7 do it"],
    )
    briefing = build_prompt(parts)
    follow_up = build_prompt(PromptParts(**{**vars(parts), "follow_up": True}))
    for text in ("the secret body", "rule one", STATUS_INSTRUCTIONS, "my long previous answer"):
        assert text in briefing and text not in follow_up, text
    for text in ("FAILED", "D7 do it", "yes, go", "you repeat yourself", "iteration 2 of 5"):
        assert text in follow_up, text
    assert follow_up.startswith("# Task t1 (inbox), continued\n")
    assert STATUS_REMINDER not in follow_up
    reminded = build_prompt(
        PromptParts(**{**vars(parts), "follow_up": True, "remind_status": True})
    )
    assert reminded.endswith(STATUS_REMINDER + "\n") and "\n" not in STATUS_REMINDER


def test_the_reminder_alone_is_enough_to_write_a_block_the_parser_reads() -> None:
    """An agent that follows the one-line reminder (its session's instructions lost) still
    writes a parseable block: the parts it names, each on its own line."""
    parts = [part.strip("`") for part in STATUS_REMINDER.split("`")[1::2]]
    assert parts[0] == INSTRUCTIONS and parts[-1].startswith("===")
    answer = "\n".join(
        part.replace("<continue|escalate|wait|success|failure>", "success").replace(
            "<one line>", "done"
        )
        for part in parts
    )
    status = parse_status(f"All done.\n{answer}")
    assert (status.status, status.reason) == ("success", "done")


def test_resumed_iterations_do_not_send_the_task_or_the_instructions_again(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    fake_claude.answers(
        {"status": "continue", "reason": "step 1", "text": "Looked at src/parser.py."},
        {"status": "continue", "reason": "step 2"},
        {"status": "success", "reason": "all done"},
    )
    write_message(workspace, "msg-1")
    assert run(workspace).outcome.value == "success"
    first, *later = prompts(fake_claude)
    assert resumed(fake_claude) == [False, True, True]
    assert BODY in first and STATUS_INSTRUCTIONS in first
    for prompt in later:
        assert BODY not in prompt and INSTRUCTIONS not in prompt
        assert "Looked at src/parser.py." not in prompt  # the session holds its own answer
        assert STATUS_REMINDER not in prompt  # its answers had a block
        assert len(prompt) < 120, prompt


def test_an_answer_without_a_status_block_gets_a_one_line_reminder_once(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    fake_claude.answers(
        {"text": "I forgot the block."},
        {"status": "continue", "reason": "block back"},
        {"status": "success", "reason": "done"},
    )
    write_message(workspace, "msg-1")
    report = run(workspace)
    assert report.outcome.value == "success" and "NO_STATUS_BLOCK" in report.reason_codes
    _, second, third = prompts(fake_claude)
    assert STATUS_REMINDER in second and STATUS_INSTRUCTIONS not in second
    assert STATUS_REMINDER not in third


def test_a_new_mode_after_escalation_gets_the_briefing_again(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """Escalated in the same agent CLI, the session is resumed with the stronger model, and
    its first prompt in the new mode carries the task and the instructions again (not the
    answer the session holds); the next iteration there is a follow-up again."""
    fake_claude.answers(
        {"status": "escalate", "reason": "too hard", "text": "I tried the regex."},
        {"status": "continue", "reason": "half way"},
        {"status": "success", "reason": "done"},
    )
    write_message(workspace, "msg-1")
    report = run(workspace)
    assert report.outcome.value == "success" and report.modes == ["code-simple", "code-complex"]
    _, escalated, third = prompts(fake_claude)
    assert resumed(fake_claude) == [False, True, True]
    assert "Mode code-complex, iteration 1 of" in escalated
    assert BODY in escalated and STATUS_INSTRUCTIONS in escalated
    assert "I tried the regex." not in escalated
    assert BODY not in third and INSTRUCTIONS not in third


def test_a_session_the_cli_lost_starts_afresh_with_everything(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """The new session holds nothing: the briefing, and the previous answer quoted."""
    fake_claude.answers(
        {"status": "continue", "reason": "step 1", "text": "The parser is in src/."},
        {"session_missing": True},
        {"status": "success", "reason": "done"},
    )
    write_message(workspace, "msg-1")
    report = run(workspace)
    assert (
        report.outcome.value == "success" and "SESSION_MISSING_FRESH_START" in report.reason_codes
    )
    _, lost, fresh = prompts(fake_claude)
    assert resumed(fake_claude) == [False, True, False]
    assert BODY not in lost
    assert BODY in fresh and STATUS_INSTRUCTIONS in fresh and "The parser is in src/." in fresh
    assert "Mode code-simple, iteration 2 of" in fresh


@needs_posix("the check command `test` is a POSIX utility")
def test_checks_that_still_fail_reach_the_resumed_session_once(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A maintenance task: the failing checks are in the briefing; a `success` the checks
    refute brings their output to the next prompt; the one after has nothing new."""
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "true")
    marker = workspace / "fixed"  # written by the agent in its second iteration
    monkeypatch.setenv("WORKER_FALLBACK__TEST", json.dumps([f"test -e {marker}"]))
    fake_claude.answers(
        {"status": "success", "reason": "fixed, I think"},
        {"status": "continue", "reason": "fixing", "files": [{"path": "fixed", "text": "ok"}]},
        {"status": "success", "reason": "fixed"},
    )
    report = run(workspace)
    assert report.source == "fallback" and report.outcome.value == "success", report.reason
    assert "VERIFY_FAILED" in report.reason_codes
    first, second, third = prompts(fake_claude)
    assert "## Failing checks" in first and "## Failing checks" in second
    assert "## Failing checks" not in third
    assert INSTRUCTIONS not in second + third


def test_a_resumed_wait_gets_the_answer_and_the_directives_that_changed(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Approved days later, the session resumes: its prompt carries the approval (what its
    STATUS asked for) and the directive a reviewer queued meanwhile, not the task again."""
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "true")
    for reviewer in ("STYLE", "DESIGN", "KNOWLEDGE"):
        monkeypatch.setenv(f"WORKER_REVIEW__{reviewer}__ENABLED", "false")
    settings = load_settings(workspace)
    with Store(settings.db_path) as store:
        db.ensure(store)
        old = queue.add(
            store, type="functional", source="style", description="name the parser errors",
            seq=0, cleanup_cap=10,
        )  # fmt: skip
    fake_claude.answers(
        {
            "status": "wait",
            "reason": "destructive",
            "wait_for": "ok",
            "resume_when": "user_approval",
        },
        {"status": "success", "reason": "done"},
    )
    write_message(workspace, "msg-1")
    assert run(workspace).outcome.value == "waiting"
    with Store(settings.db_path) as store:
        new = queue.add(
            store, type="functional", source="style", description="log the parser's input",
            seq=1, cleanup_cap=10,
        )  # fmt: skip
        assert queue.drop(store, int(old or 0))
    approved = CliRunner().invoke(
        app, ["waits", "approve", "msg-1", "--note", "yes, go", "--workspace", str(workspace)]
    )
    assert approved.exit_code == 0, approved.output
    assert run(workspace).outcome.value == "success"
    first, again = prompts(fake_claude)
    assert "name the parser errors" in first and BODY in first
    assert resumed(fake_claude) == [False, True]
    assert "yes, go" in again and BODY not in again and INSTRUCTIONS not in again
    assert "## DIRECTIVES NEW SINCE YOU STARTED" in again and f"D{new} " in again
    assert f"## DIRECTIVES WITHDRAWN\nD{old}: no longer asked" in again
