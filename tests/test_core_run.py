"""`worker run` end to end on the embedded defaults, with a fake `claude` printing stream-json."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import state_of
from worker.config import load_settings
from worker.errors import ConfigError
from worker.process.platform.process import alive  # a zombie (killed, not yet reaped) is dead
from worker.run.runner import RunOptions, run_once

from .conftest import FakeAgent, aged, needs_posix, write_message


@pytest.fixture(autouse=True)
def _no_reviewers(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the task loop; reviewers have their own tests."""
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")


def run(ws: Path, **options: object):
    return run_once(load_settings(ws), RunOptions(**options))  # type: ignore[arg-type]


def statuses(ws: Path) -> list[tuple[str, str, int, str]]:
    db = sqlite3.connect(state_of(ws) / "worker.db")
    return db.execute(
        "SELECT mode, model, iteration, status FROM iterations ORDER BY id"
    ).fetchall()


def test_success_on_the_first_iteration(workspace: Path, fake_claude: FakeAgent) -> None:
    write_message(workspace, "msg-1", subject="Fix the parser")
    report = run(workspace)
    assert report.outcome.value == "success"
    assert (report.task_id, report.source, report.modes, report.iterations) == (
        "msg-1",
        "inbox",
        ["code-simple"],
        1,
    )
    assert report.reason_codes[0] == "INBOX_TASK_SELECTED"
    call = fake_claude.task_calls[0]
    assert call["argv"][:6] == [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--model",
        "haiku",
    ]
    assert "Please do the thing." in call["stdin"] and "=== AGENT STATUS ===" in call["stdin"]
    # The message is done and the sender got a reply.
    assert (workspace / "inbox" / "done" / "msg-1.json").exists()
    reply = json.loads((workspace / "inbox" / "outbox" / "msg-1-success-reply.json").read_text())
    assert reply["to"] == "alice" and reply["in_reply_to"] == "msg-1"
    assert "Outcome: success" in reply["body"]


def test_continue_continue_success_resumes_the_session(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    fake_claude.answers(
        {"status": "continue", "reason": "step 1"},
        {"status": "continue", "reason": "step 2"},
        {"status": "success", "reason": "all done"},
    )
    write_message(workspace, "msg-2")
    report = run(workspace)
    assert report.outcome.value == "success" and report.iterations == 3
    assert [s[3] for s in statuses(workspace)] == ["continue", "continue", "success"]
    first, second, third = fake_claude.task_calls
    assert "--resume" in second["argv"] and "--resume" in third["argv"]
    assert "Please do the thing." in first["stdin"] and "=== AGENT STATUS ===" in first["stdin"]
    # The resumed session holds the task, the instructions and its own answers: the next
    # prompts carry only what is new (here, nothing but the iteration).
    for later in (second, third):
        prompt = later["stdin"]
        assert "Please do the thing." not in prompt and "STATUS" not in prompt, prompt
        assert "step 1" not in prompt
    assert "iteration 2 of 5" in second["stdin"] and "iteration 3 of 5" in third["stdin"]


def test_escalation_from_code_simple_to_code_complex(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    fake_claude.answers(
        {"status": "escalate", "reason": "too hard", "escalate_to": "opus"}, {"status": "success"}
    )
    write_message(workspace, "msg-3")
    report = run(workspace)
    assert report.outcome.value == "success"
    assert report.modes == ["code-simple", "code-complex"]
    assert "AGENT_ESCALATE" in report.reason_codes
    models = [c["argv"][c["argv"].index("--model") + 1] for c in fake_claude.task_calls]
    assert models == ["haiku", "opus"]
    assert [s[2] for s in statuses(workspace)] == [1, 1]  # the count starts over


def test_failure_at_the_top_mode_fails_the_task(workspace: Path, fake_claude: FakeAgent) -> None:
    fake_claude.answers({"status": "failure", "reason": "cannot be done"})
    write_message(workspace, "msg-4")
    report = run(workspace)
    assert report.outcome.value == "failure" and report.exit_code == 1
    assert report.modes == ["code-simple", "code-complex"]
    assert "FAILURE_ESCALATED" in report.reason_codes
    assert "FAILURE_AT_TOP_MODE" in report.reason_codes
    assert report.reason == "cannot be done"


def test_max_iterations_without_terminal_status(workspace: Path, fake_claude: FakeAgent) -> None:
    fake_claude.answers({"status": "continue"})
    write_message(workspace, "msg-5")
    report = run(workspace, mode="sync-simple")
    # sync-simple: 3 iterations, then sync-complex: 5 iterations, then nothing stronger.
    assert report.outcome.value == "failure"
    assert report.iterations == 8 and report.modes == ["sync-simple", "sync-complex"]
    assert "MAX_ITERATIONS" in report.reason_codes
    assert "MAX_ITERATIONS_AT_TOP" in report.reason_codes


def test_wait_writes_a_wait_state_in_the_specification_format(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    fake_claude.answers(
        {
            "status": "wait",
            "reason": "need approval",
            "wait_for": "a human",
            "resume_when": "user_approval",
        }
    )
    write_message(workspace, "msg-6")
    report = run(workspace)
    assert report.outcome.value == "waiting" and report.exit_code == 0
    state = json.loads((workspace / "wait_states" / "msg-6.json").read_text())
    assert state["taskId"] == "msg-6" and state["resumeWhen"] == "user_approval"
    assert state["waitFor"] == "a human" and state["reason"] == "need approval"
    assert state["context"]["mode"] == "code-simple" and state["context"]["model"] == "haiku"
    assert (
        state["context"]["iteration"] == 1 and "AGENT STATUS" in state["context"]["outputSnippet"]
    )
    assert state["sessionId"]


def test_timeout_kills_a_hanging_agent_and_its_children(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_ITERATION_TIMEOUT_S", "1.5")
    fake_claude.answers({"hang": 60, "child": True, "status": "success"})
    write_message(workspace, "msg-7")
    report = run(workspace, mode="sync-complex")  # top mode: no escalation, 5 iterations
    assert report.outcome.value == "failure"
    assert "AGENT_TIMEOUT" in report.reason_codes
    children = Path(str(fake_claude.log) + ".children").read_text().split()
    for pid in [int(c["pid"]) for c in fake_claude.task_calls] + [int(p) for p in children]:
        assert not alive(pid), f"process {pid} survived the timeout"


def test_garbage_output_is_not_a_status(workspace: Path, fake_claude: FakeAgent) -> None:
    fake_claude.answers({"garbage": True})
    write_message(workspace, "msg-8")
    report = run(workspace, mode="sync-complex")
    assert report.outcome.value == "failure"
    # The same CLI error three times in a row: a broken agent, not five tries.
    assert report.iterations == 3 and report.reason_codes[-1] == "AGENT_REPEATED_ERROR"
    assert "this is not json at all" in report.reason  # what the CLI printed, named


def test_agent_exiting_non_zero_is_retried_then_escalated(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    fake_claude.answers({"exit": 3, "text": "crashed"}, {"status": "success"})
    write_message(workspace, "msg-9")
    report = run(workspace)
    assert report.outcome.value == "success" and report.iterations == 2
    assert "AGENT_ERROR" in report.reason_codes
    assert statuses(workspace)[0][3] == "continue"


def test_missing_agent_executable_is_a_configuration_error_before_any_claim(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing agent program is the operator's to fix (exit 78), not the task's failure."""
    monkeypatch.setenv("WORKER_CLAUDE_BIN", str(workspace / "no-such-claude"))
    message = write_message(workspace, "msg-10")
    with pytest.raises(ConfigError, match=r"no-such-claude does not exist.*claude_bin"):
        run(workspace)
    assert message.exists() and json.loads(message.read_text())["status"] == "unread"


def test_cost_cap_stops_the_task(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_TASK_COST_CAP_USD", "0.05")
    fake_claude.answers({"status": "continue", "cost": 0.03})
    write_message(workspace, "msg-11")
    report = run(workspace)
    assert report.outcome.value == "failure" and "COST_CAP" in report.reason_codes
    assert report.iterations == 2
    budgets = [c["argv"][c["argv"].index("--max-budget-usd") + 1] for c in fake_claude.task_calls]
    assert budgets == ["0.05", "0.02"]


def test_idle_run_records_a_decision(workspace: Path, fake_claude: FakeAgent) -> None:
    report = run(workspace)
    assert report.outcome.value == "idle" and report.reason_codes[0] == "NOTHING_TO_DO"
    db = sqlite3.connect(state_of(workspace) / "worker.db")
    (codes, candidates) = db.execute("SELECT reason_codes, candidates FROM decisions").fetchone()
    assert json.loads(codes)[0] == "NOTHING_TO_DO"
    assert json.loads(candidates)["inbox"] == 0
    assert fake_claude.task_calls == []


def test_messages_for_other_machines_and_read_ones_are_ignored(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    write_message(workspace, "other", to="someone-else")
    write_message(workspace, "old", status="read")
    write_message(workspace, "reply", in_reply_to="x")
    assert run(workspace).outcome.value == "idle"


def test_priority_then_age_orders_the_inbox(workspace: Path, fake_claude: FakeAgent) -> None:
    write_message(workspace, "late-low", priority="low", created_at="2026-01-01T00:00:00Z")
    write_message(workspace, "new-high", priority="high", created_at="2026-11-01T00:00:00Z")
    write_message(
        workspace, "old-high", priority="high", created_at="2026-10-01T00:00:00Z", to="all"
    )
    assert run(workspace).task_id == "old-high"
    assert run(workspace).task_id == "new-high"


def test_corrupt_message_is_moved_aside_and_the_run_goes_on(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    (workspace / "inbox" / "bad.json").write_text('{"id": "bad", "to": "all", ')
    (workspace / "inbox" / "bad2.json").write_text(json.dumps({"id": "../x", "to": "all"}))
    aged(workspace / "inbox" / "bad.json", workspace / "inbox" / "bad2.json")
    write_message(workspace, "good")
    report = run(workspace)
    assert report.task_id == "good" and report.outcome.value == "success"
    assert "SOURCE_ERROR" in report.reason_codes
    rejected = workspace / "inbox" / "rejected"
    assert (rejected / "bad.json").exists()
    assert "invalid message" in (rejected / "bad.json.reason.txt").read_text()
    assert "from: Field required" in (rejected / "bad2.json.reason.txt").read_text()


def test_task_id_reruns_a_finished_task(workspace: Path, fake_claude: FakeAgent) -> None:
    write_message(workspace, "again")
    assert run(workspace).outcome.value == "success"
    assert run(workspace).outcome.value == "idle"
    report = run(workspace, task_id="again")
    assert report.outcome.value == "success" and report.reason_codes[0] == "TASK_ID_REQUESTED"
    assert len(fake_claude.task_calls) == 2


@needs_posix("the check command `true` is a POSIX utility")
def test_fallback_maintenance_succeeds_without_the_agent_when_checks_pass(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_FALLBACK__TEST", '["true"]')
    report = run(workspace)
    assert report.source == "fallback" and report.outcome.value == "success"
    assert "FALLBACK_CHECKS_PASSED" in report.reason_codes
    assert fake_claude.task_calls == []
    assert run(workspace).outcome.value == "idle"  # not due again before the interval


def test_fallback_asks_the_agent_to_repair_and_verifies(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = workspace / "fixed"
    monkeypatch.setenv("WORKER_FALLBACK__TEST", json.dumps([f"test -e {marker}"]))
    # First "success" is a lie (checks still fail); the second comes after the fix.
    fake_claude.answers({"status": "success"}, {"status": "success"})
    original = fake_claude.answers

    report_holder = {}

    def lie_then_fix() -> None:
        report_holder["r"] = run(workspace)

    # The agent "fixes" the build between its iterations: create the marker after call 1.
    import threading

    def watcher() -> None:
        import time as _t

        while not fake_claude.task_calls:
            _t.sleep(0.05)
        marker.write_text("ok")

    thread = threading.Thread(target=watcher)
    thread.start()
    lie_then_fix()
    thread.join()
    del original
    report = report_holder["r"]
    assert report.source == "fallback"
    assert "Failing checks" in fake_claude.task_calls[0]["stdin"]
    assert report.outcome.value == "success"


@needs_posix("the agent is a #!/bin/sh script")
def test_command_agent_with_prompt_in_a_file(workspace: Path, tmp_path: Path) -> None:
    """Any executable can be the agent: the prompt in a file, plain text out."""
    agent = tmp_path / "agent.sh"
    agent.write_text(
        "#!/bin/sh\n"
        'grep -q "Please do the thing" "$1" || exit 9\n'
        'echo "model=$2"\n'
        "printf '=== AGENT STATUS ===\\nSTATUS: success\\nREASON: via file\\n"
        "===================\\n'\n"
    )
    agent.chmod(0o755)
    (workspace / "modes").mkdir()
    (workspace / "modes" / "modes.json").write_text(
        json.dumps(
            {
                "modes": [
                    {
                        "id": "plain",
                        "model": "local-model",
                        "maxIterations": 2,
                        "agent": "command",
                        "command": [str(agent), "{prompt_file}", "{model}"],
                        "default": True,
                    }
                ]
            }
        )
    )
    write_message(workspace, "msg-cmd")
    report = run(workspace)
    assert report.outcome.value == "success" and report.reason == "via file"
    log = next((state_of(workspace) / "logs").rglob("iteration-1.jsonl")).read_text()
    assert "model=local-model" in log


def test_shipped_modes_pass_their_permission_mode_to_claude(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """Headless claude cannot ask: the shipped modes allow edits explicitly, nothing more."""
    write_message(workspace, "msg-perm")
    run(workspace)
    argv = fake_claude.task_calls[0]["argv"]
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"
    assert "--dangerously-skip-permissions" not in argv


def test_the_agent_never_gets_the_workers_github_token(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent reading untrusted text must not be able to act as the worker on GitHub."""
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "x" * 36)
    monkeypatch.setenv("WORKER_GITHUB_TOKEN", "ghp_" + "y" * 36)
    monkeypatch.setenv("GH_TOKEN", "ghp_" + "x" * 36)
    write_message(workspace, "msg-token")
    assert run(workspace).outcome.value == "success"
    assert fake_claude.task_calls[0]["tokens"] == []


def test_a_message_in_a_waiting_tasks_thread_is_its_answer_not_a_new_task(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    fake_claude.answers({"status": "wait", "wait_for": "Bob", "resume_when": "roosync_response"})
    write_message(workspace, "msg-w")
    assert run(workspace).outcome.value == "waiting"
    write_message(workspace, "answer", thread_id="msg-w", subject="here you go")
    write_message(workspace, "own-thread", thread_id="own-thread")
    report = run(workspace)
    # The answer resumes the waiting task; a message that starts its own thread is a task.
    assert report.task_id == "msg-w" and report.source == "wait"
    assert run(workspace).task_id == "own-thread"


def test_wall_clock_cap_ends_a_hanging_iteration_and_the_task(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-iteration timeout is 30 minutes, but the task's cap is what the user pays for."""
    monkeypatch.setenv("WORKER_TASK_WALL_CLOCK_S", "2")
    fake_claude.answers({"hang": 60, "status": "success"})
    write_message(workspace, "msg-wall")
    report = run(workspace)
    assert report.outcome.value == "failure"
    assert report.reason_codes[-1] == "WALL_CLOCK_CAP"
    assert report.iterations == 1


def test_a_run_that_crashes_says_so_in_its_record(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected error is not a run forever `running` in `worker log`."""
    import worker.run.loop

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(worker.run.loop, "build_prompt", broken)
    write_message(workspace, "msg-crash")
    with pytest.raises(RuntimeError):
        run(workspace)
    db = sqlite3.connect(state_of(workspace) / "worker.db")
    outcome, reason = db.execute("SELECT outcome, reason FROM runs").fetchone()
    assert outcome == "aborted" and reason == "RuntimeError: disk on fire"
    # The claim holds (its lease brings the task back), the message is not lost.
    assert (workspace / "inbox" / "claimed" / "msg-crash.json").exists()


def test_the_agent_cannot_change_how_the_next_run_behaves(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """Without a worktree the agent works beside worker.toml and the modes: what it changes
    there is restored (its version kept in the run's logs); an agent that reaches the state
    folder anyway (it runs as the user) and deletes the database gets it written back."""
    (workspace / "worker.toml").write_text("task_cost_cap_usd = 2.0\n")
    db_file = state_of(workspace) / "worker.db"
    wrapper = fake_claude.path.read_text()
    fake_claude.path.write_text(
        wrapper.replace(
            "exec ",
            (
                "echo 'task_cost_cap_usd = 500.0' > worker.toml\n"
                "mkdir -p modes && echo '{\"modes\": []}' > modes/modes.json\n"
                f"rm -f '{db_file}'\n"
                "exec "
            ),
        )
    )
    write_message(workspace, "msg-guard")
    report = run(workspace)
    assert report.outcome.value == "success"
    assert "WORKER_CONFIG_RESTORED" in report.reason_codes
    assert "WORKER_STATE_RESTORED" in report.reason_codes
    assert (workspace / "worker.toml").read_text() == "task_cost_cap_usd = 2.0\n"
    assert not (workspace / "modes" / "modes.json").exists()
    logs = state_of(workspace) / "logs" / f"run-{report.run_id}"
    assert "500.0" in (logs / "agent-worker.toml").read_text()
    # The run's own record survived the deletion of the database file.
    db = sqlite3.connect(state_of(workspace) / "worker.db")
    assert db.execute("SELECT outcome FROM runs WHERE id = ?", (report.run_id,)).fetchone() == (
        "success",
    )
