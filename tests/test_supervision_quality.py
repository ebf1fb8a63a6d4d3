"""Issue 19 (and issue 11, item 5): what the detectors call stuck, and what they call progress.

Each test is one rule of the README's "The supervisor" section, told as a story of events.
"""

from __future__ import annotations

import json

from worker.models import AgentEvent, EventKind, InfraKind
from worker.supervision.anomaly import Anomaly
from worker.supervision.detectors import StreamDetectors
from worker.supervision.progress import shell_writes
from worker.supervision.protocol import NullSupervisor

from .test_supervision_kit import Stream, feed, settings, supervisor, view


def observe(events: list[AgentEvent]) -> tuple[StreamDetectors, list[Anomaly]]:
    detectors = StreamDetectors(settings())
    found = [anomaly for event in events for anomaly in detectors.observe(event)]
    return detectors, found


def kinds(found: list[Anomaly], level: str | None = None) -> set[str]:
    return {a.kind for a in found if level is None or a.level == level}


def test_polling_whose_answer_changes_is_progress_not_a_loop() -> None:
    """Issue 11: `gh run view 1234 --json status` 7 times while the run goes from queued to
    completed is an agent watching CI, not a loop (OpenHands compares action and result)."""
    stream = Stream()
    answers = ["queued", "in_progress 1/4", "in_progress 2/4", "in_progress 3/4"]
    answers += ["in_progress 4/4", "completed pending", "completed success"]
    for answer in answers:
        stream.tool("Bash", {"command": "gh run view 1234 --json status"}, output=answer)
    _, found = observe(stream.events)
    assert found == []


def test_the_same_call_with_the_same_answer_is_a_loop() -> None:
    stream = Stream()
    for _ in range(5):
        stream.tool("Bash", {"command": "gh run view 1234 --json status"}, output="in_progress")
    _, found = observe(stream.events)
    assert [(a.kind, a.level, a.count) for a in found] == [
        ("loop", "warn", 3),
        ("loop", "warn", 4),
        ("loop", "urgent", 5),
    ]


def test_the_same_call_failing_is_a_loop_whatever_the_error_says() -> None:
    stream = Stream()
    for i in range(5):
        stream.tool("Bash", {"command": "make"}, error=f"make: *** [all] Error {i} at {i}s")
    _, found = observe(stream.events)
    assert ("loop", "urgent") in {(a.kind, a.level) for a in found}


def test_repeated_errors_compare_normalised_text_whatever_the_arguments() -> None:
    """Issue 19's first miss: eight different edits rejected with the same syntax error."""
    stream = Stream()
    for i in range(8):
        stream.tool(
            "Edit",
            {"file_path": f"/tmp/work-{i}/src/app.py", "old_string": f"x = {i}", "new_string": "y"},
            error=f"SyntaxError: invalid syntax (/tmp/work-{i}/src/app.py, line {10 + i})",
        )
    _, found = observe(stream.events)
    errors = [a for a in found if a.kind == "repeated_error"]
    assert [a.count for a in errors][:2] == [3, 4]
    assert any(a.level == "urgent" and a.count == 6 for a in errors)
    assert "loop" not in kinds(found)  # the calls all differ


def _cli_session(stream: Stream, message: str) -> None:
    stream.session()
    stream._add(AgentEvent(EventKind.ERROR, stream.index, error="Reconnecting... 1/5"))
    stream._add(AgentEvent(EventKind.ERROR, stream.index, error=message))
    stream._add(AgentEvent(EventKind.RESULT, stream.index, is_error=True, error=message))


def test_a_cli_error_in_every_session_is_an_infrastructure_failure() -> None:
    """Issue 19's second miss: Codex ends every session on a 401 and no tool ever runs. The
    third session makes it urgent: the radio check stops the agent and the supervisor hands
    the loop an InfraFailure (authentication) instead of a task failure."""
    sup = supervisor()
    stream = Stream()
    for request in ("99cdbe04acfb0b34", "99cdbf27ee0ea01a", "99cdc01b2b079fd6"):
        _cli_session(stream, f"exceeded retry limit, last status: 401 Unauthorized, {request}")
    for _ in range(10 - len(stream.events) % 10):
        stream.say("")  # up to the next radio check
    stop = feed(sup, stream)
    assert stop is not None and "CLI failure" in stop and "401 Unauthorized" in stop
    infra = sup.infra_failure()
    assert infra is not None and infra.kind is InfraKind.AUTH and infra.http_status == 401
    assert "3 sessions in a row" in infra.message


def test_one_failing_session_or_a_cli_that_recovers_is_not_a_cli_failure() -> None:
    """A CLI's own retries inside one session count once, a session whose tools run forgets
    the errors before it, and a retry notice is not an error."""
    stream = Stream()
    for _ in range(4):
        stream._add(AgentEvent(EventKind.ERROR, stream.index, error="Reconnecting... 2/5"))
    _cli_session(stream, "stream disconnected before completion")
    stream.tool("Bash", {"command": "ls"})  # that session worked after all
    _cli_session(stream, "stream disconnected before completion")
    detectors, found = observe(stream.events)
    assert "cli_error" not in kinds(found) and detectors.infra is None


def test_usage_limits_and_outages_are_named_apart() -> None:
    for message, kind in (
        ("You've hit your usage limit · resets 1pm", InfraKind.USAGE_LIMIT),
        ("529 Overloaded", InfraKind.UNAVAILABLE),
    ):
        stream = Stream()
        for _ in range(3):
            _cli_session(stream, message)
        detectors, _ = observe(stream.events)
        assert detectors.infra is not None and detectors.infra.kind is kind


def test_a_file_changed_through_the_shell_is_a_file_change() -> None:
    for command in (
        "sed -i 's/a/b/' src/app.py",
        "cat > notes.md <<'EOF'\nhello\nEOF",
        "apply_patch <<'PATCH'\n*** Begin Patch",
        "git commit -am 'fix'",
        "python gen.py >> out.txt",
    ):
        assert shell_writes({"command": command}), command
    for command in ("ls -la", "make 2>&1 | tail", "echo hi > /dev/null", "grep -n x a.py"):
        assert not shell_writes({"command": command}), command


def test_an_iteration_that_edits_only_through_the_shell_is_no_stall() -> None:
    """Issue 19: runs that edit with `sed -i` were called stalled; the git view may miss it
    (here: no changed files reported), the events do not."""
    sup = supervisor()
    for iteration in range(1, 5):
        command = f"sed -i 's/v{iteration}/v{iteration + 1}/' app.py"
        feed(sup, Stream().tool("Bash", {"command": command}, output=""))
        lines = sup.after_iteration(view(iteration))
        assert not any("Stall" in line for line in lines)


def test_turns_of_new_information_are_not_a_stall() -> None:
    """Research, tests and CI waits learn something each turn: 60 turns, no stall."""
    stream = Stream()
    for i in range(20):
        stream.tool("Read", {"file_path": f"src/m{i}.py"}, output=f"module {i}")
        stream.tool("Bash", {"command": "pytest -q"}, output=f"{20 - i} failed, {i} passed")
        stream.tool("Bash", {"command": f"gh run view {i}"}, output="in_progress")
    _, found = observe(stream.events)
    assert "stall" not in kinds(found)


def test_repeated_rejections_from_the_harness_are_repeated_errors() -> None:
    """A harness (or user) rejecting the answer in plain user text, again and again."""
    stream = Stream()
    for i in range(6):
        stream.say(f"Here is my answer, attempt {i}.")
        text = f"Format error: found {i % 2} actions, please give EXACTLY ONE bash block."
        stream._add(AgentEvent(EventKind.OTHER, stream.index, text=text, raw_type="user"))
    _, found = observe(stream.events)
    rejections = [a for a in found if a.kind == "repeated_error"]
    assert rejections[0].count == 3 and rejections[-1].level == "urgent"
    assert rejections[0].evidence["tool"] == "the harness"


def test_a_cascade_forgets_failures_once_the_agent_succeeds() -> None:
    """Issue 19's false alarm: a stray `cd` fails three tools; the agent fixes it."""
    stream = Stream()
    stream.tool("Read", {"file_path": "a.py"}, error="File does not exist.")
    stream.tool("Bash", {"command": "make"}, error="make: *** No targets.")
    stream.tool("Bash", {"command": "cd /repo"}, output="")  # fixed
    stream.tool("Grep", {"pattern": "x"}, error="Path does not exist: /wrong")
    stream.tool("Glob", {"pattern": "*.c"}, error="Path does not exist: /wrong")
    _, found = observe(stream.events)
    assert "cascade" not in kinds(found)


def test_parallel_calls_failing_in_one_turn_are_not_a_cascade() -> None:
    """Three parallel calls that fail together share one cause; the agent has not yet had a
    turn to react. A fourth failure in the next turn makes it a cascade."""
    events = [AgentEvent(EventKind.TEXT, 0, text="Let me look around.")]
    for i, tool in enumerate(("Read", "Grep", "Glob")):
        events.append(AgentEvent(EventKind.TOOL_CALL, 0, tool=tool, tool_id=f"t{i}", args={}))
    for i in range(3):
        events.append(
            AgentEvent(EventKind.TOOL_RESULT, 1, tool_id=f"t{i}", is_error=True, error="No dir")
        )
    _, found = observe(events)
    assert "cascade" not in kinds(found)
    events.append(AgentEvent(EventKind.TOOL_CALL, 2, tool="Bash", tool_id="t3", args={}))
    events.append(AgentEvent(EventKind.TOOL_RESULT, 3, tool_id="t3", is_error=True, error="x"))
    _, found = observe(events)
    assert "cascade" in kinds(found)


def test_supervision_off_reports_no_infrastructure_failure() -> None:
    """The contract the task loop calls: the null supervisor has nothing to report."""
    assert NullSupervisor().infra_failure() is None


def test_the_live_claude_adapter_reports_plain_user_text_for_the_detectors() -> None:
    """A harness's rejection arrives in Claude's stream as plain user text: the adapter's own
    normaliser (what a live run uses, not only `worker inspect`) turns it into an event, and
    the same rejection three times is a repeated error while the agent runs."""
    from worker.agents.claude_stream import normalise_line

    text = "Format error: your answer must contain EXACTLY ONE bash code block. Try again."
    rejection = {"type": "user", "message": {"role": "user", "content": text}}
    answer = {
        "type": "assistant",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "Answer."}]},
    }
    lines = [json.dumps(obj) for _ in range(3) for obj in (answer, rejection)]
    events = [event for i, line in enumerate(lines) for event in normalise_line(line, i)]
    user = [e for e in events if e.kind is EventKind.OTHER and e.raw_type == "user"]
    assert [e.text for e in user] == [text] * 3
    _, found = observe(events)
    assert "repeated_error" in kinds(found)
    tool_result = {
        "type": "user",
        "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    }
    (only,) = normalise_line(json.dumps(tool_result), 0)
    assert only.kind is EventKind.TOOL_RESULT  # a tool's answer is not user text
