"""The Codex and Gemini CLI adapters: recorded transcripts folded into results, and `worker run`
end to end with a fake `codex` and a fake `gemini` that print the real formats."""

from __future__ import annotations

import json
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import state_of
from worker.agents.codex import CodexAdapter, CodexCollector
from worker.agents.gemini import INSTRUCTION, GeminiAdapter, GeminiCollector
from worker.agents.registry import adapter_for, permission_args
from worker.config import load_settings
from worker.models import AgentRequest, AgentResult, EventKind
from worker.modes import Mode
from worker.run.runner import RunOptions, run_once

from .conftest import TRANSCRIPTS, write_message

CODEX_TRANSCRIPTS = sorted(TRANSCRIPTS.glob("codex-*.jsonl"))
GEMINI_TRANSCRIPTS = sorted(TRANSCRIPTS.glob("gemini-*"))


def codex_result(lines: list[str], exit_code: int | None = 0) -> AgentResult:
    collector = CodexCollector()
    for line in lines:
        collector.feed(line)
    return collector.result(exit_code)


def gemini_result(lines: list[str], exit_code: int | None = 0) -> AgentResult:
    collector = GeminiCollector()
    for line in lines:
        collector.feed(line)
    collector.close()
    return collector.result(exit_code)


def lines_of(name: str) -> list[str]:
    return (TRANSCRIPTS / name).read_text(encoding="utf-8").splitlines()


def test_every_recorded_transcript_is_covered() -> None:
    """A new recording in the fixtures folder must get its expectations here."""
    assert [p.name for p in CODEX_TRANSCRIPTS] == [
        "codex-exec-command-execution.jsonl",
        "codex-exec-error-events-partial.jsonl",
        "codex-exec-file-change.jsonl",
    ]
    assert [p.name for p in GEMINI_TRANSCRIPTS] == [
        "gemini-json-output.json",
        "gemini-stream-edit-file.jsonl",
    ]


# Codex: expected (final text start, session id, is_error, subtype) per recording, exit code 0
# for the complete runs and 1 for the failed one (a failed turn exits 1).
CODEX_EXPECTED = {
    "codex-exec-command-execution.jsonl": (
        "Found 1 text file `hello.txt`",
        "019a2d7b-7fb8-78e1-8cfa-5bdbe274a3aa",
        False,
        "success",
    ),
    "codex-exec-file-change.jsonl": (
        "Created `hello.txt`",
        "019a2d7a-8e1c-7111-b1a6-8cec551a55a0",
        False,
        "success",
    ),
    "codex-exec-error-events-partial.jsonl": ("ok", None, True, "error"),
}


@pytest.mark.parametrize("path", CODEX_TRANSCRIPTS, ids=lambda p: p.name)
def test_codex_recordings_fold_into_a_result(path: Path) -> None:
    text, session, is_error, subtype = CODEX_EXPECTED[path.name]
    result = codex_result(path.read_text(encoding="utf-8").splitlines(), 1 if is_error else 0)
    assert result.final_text.startswith(text)
    assert (result.session_id, result.is_error, result.subtype) == (session, is_error, subtype)
    assert result.cost_usd == 0.0 and not result.usage_limit_hit


def test_codex_usage_and_tools_come_from_the_stream() -> None:
    result = codex_result(lines_of("codex-exec-command-execution.jsonl"))
    assert (result.input_tokens, result.output_tokens, result.num_turns) == (6086, 223, 1)
    calls = [e for e in result.events if e.kind is EventKind.TOOL_CALL]
    assert [(c.tool, c.args) for c in calls] == [("command_execution", {"command": "zsh -lc ls"})]


def test_codex_error_event_names_the_problem_and_an_error_item_is_only_a_warning() -> None:
    lines = lines_of("codex-exec-error-events-partial.jsonl")
    failed = codex_result(lines, 1)
    errors = [e.error for e in failed.events if e.kind is EventKind.ERROR]
    assert errors[-1] == "shared rollout token budget exhausted"
    # Without the top-level error, the same run (warning item, message, completed turn) is fine.
    completed = '{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}'
    fine = codex_result([*lines[:4], completed])
    assert (fine.is_error, fine.final_text, fine.session_id) == (False, "ok", "<redacted>")


def test_codex_turn_failed_is_an_error_with_its_message() -> None:
    """The documented closing line of the cut recording (see the fixtures README)."""
    failed = '{"type":"turn.failed","error":{"message":"shared rollout token budget exhausted"}}'
    result = codex_result([*lines_of("codex-exec-error-events-partial.jsonl")[:3], failed], 1)
    assert (result.is_error, result.subtype, result.session_id) == (True, "turn.failed", None)
    assert result.final_text == "shared rollout token budget exhausted"  # no agent message


def test_codex_retried_stream_error_followed_by_a_completed_turn_is_not_an_error() -> None:
    """`Reconnecting... 1/5` looks like a fatal error, but the turn goes on (openai/codex#32984)."""
    lines = lines_of("codex-exec-file-change.jsonl")
    retry = '{"type":"error","message":"Reconnecting... 1/5 (stream disconnected)"}'
    result = codex_result([*lines[:2], retry, *lines[2:]])
    assert (result.is_error, result.subtype) == (False, "success")


def test_codex_usage_limit_text_waits_instead_of_failing() -> None:
    text = "You've hit your usage limit. Upgrade to Pro or try again in 2 days 17 hours 14 minutes."
    lines = [
        '{"type":"thread.started","thread_id":"t-1"}',
        json.dumps({"type": "error", "message": text}),
        json.dumps({"type": "turn.failed", "error": {"message": text}}),
    ]
    assert codex_result(lines, 1).usage_limit_hit


def test_codex_stream_cut_short_or_bad_exit_is_an_error() -> None:
    lines = lines_of("codex-exec-command-execution.jsonl")
    assert codex_result(lines[:-1]).subtype == "no_result"
    assert codex_result(lines, 2).subtype == "exit_2"


@pytest.mark.parametrize("path", GEMINI_TRANSCRIPTS, ids=lambda p: p.name)
def test_gemini_recordings_fold_into_a_result(path: Path) -> None:
    result = gemini_result(path.read_text(encoding="utf-8").splitlines())
    if path.suffix == ".jsonl":
        assert (result.final_text, result.is_error, result.subtype) == ("Done.", False, "success")
        assert (result.input_tokens, result.output_tokens) == (21694, 77)
        sessions = [e.session_id for e in result.events if e.kind is EventKind.SESSION]
        assert sessions == ["453aa339-7d2b-4709-a41a-b0b73beaff85"]
    else:
        # `--output-format json` (one pretty-printed object) is not the stream the adapter asks
        # for: if extraArgs switched to it, the run must not pass for a success.
        assert (result.is_error, result.subtype) == (True, "no_result")
    assert result.session_id is None  # each Gemini iteration is a new session
    assert result.cost_usd == 0.0


def test_gemini_deltas_are_joined_and_tool_calls_kept() -> None:
    lines = [
        '{"type":"init","session_id":"s-1","model":"gemini-2.5-pro"}',
        '{"type":"message","role":"user","content":"the prompt"}',
        '{"type":"message","role":"assistant","content":"Hello ","delta":true}',
        '{"type":"message","role":"assistant","content":"world.","delta":true}',
        '{"type":"tool_use","tool_name":"read_file","tool_id":"r-1","parameters":{"p":"a"}}',
        '{"type":"tool_result","tool_id":"r-1","status":"success","output":"x"}',
        '{"type":"message","role":"assistant","content":"Done.","delta":true}',
        '{"type":"result","status":"success","stats":{"input_tokens":5,"output_tokens":3}}',
    ]
    result = gemini_result(lines)
    assert result.final_text == "Hello world.\n\nDone."
    assert [e.kind for e in result.events if e.kind is not EventKind.OTHER] == [
        EventKind.SESSION,
        EventKind.TEXT,
        EventKind.TOOL_CALL,
        EventKind.TOOL_RESULT,
        EventKind.TEXT,
        EventKind.RESULT,
    ]


def test_gemini_errors() -> None:
    head = lines_of("gemini-stream-edit-file.jsonl")[:-1]
    failed = (
        '{"type":"result","status":"error","error":{"type":"Error","message":"quota exceeded"}}'
    )
    result = gemini_result([*head, failed], 1)
    assert (result.is_error, result.subtype) == (True, "error")
    # An empty model response: an error event of severity error, then a result with status error.
    invalid = '{"type":"error","severity":"error","message":"Invalid stream: empty response"}'
    no_text = [head[0], invalid, '{"type":"result","status":"error"}']
    result = gemini_result(no_text)
    assert result.is_error and result.final_text == "Invalid stream: empty response"
    # A warning (a loop was detected) alone does not fail the run.
    warning = '{"type":"error","severity":"warning","message":"Loop detected, stopping execution"}'
    assert not gemini_result(
        [*head, warning, lines_of("gemini-stream-edit-file.jsonl")[-1]]
    ).is_error
    assert gemini_result(head, 53).subtype == "turn_limit"
    assert gemini_result(head, 42).subtype == "input_error"
    assert gemini_result(head).subtype == "no_result"


def agent_request(tmp_path: Path, **fields: Any) -> AgentRequest:
    return AgentRequest(prompt="p", model="m", cwd=tmp_path, timeout_s=60, **fields)


def test_codex_command_line(tmp_path: Path) -> None:
    adapter = CodexAdapter("codex")
    assert adapter.command(agent_request(tmp_path)) == [
        "codex", "exec", "--json", "--model", "m", "--skip-git-repo-check", "-",
    ]  # fmt: skip
    (tmp_path / ".git").mkdir()
    (tmp_path / "sub").mkdir()
    resumed = adapter.command(
        agent_request(tmp_path / "sub", resume_session="t-1", extra_args=("--sandbox", "read-only"))
    )
    # Exec-level flags before `resume`, which older and newer CLIs both accept.
    assert resumed == [
        "codex", "exec", "--json", "--model", "m", "--sandbox", "read-only", "resume", "t-1", "-",
    ]  # fmt: skip


def test_gemini_command_line_and_approval_mode(tmp_path: Path) -> None:
    mode = Mode.model_validate(
        {"id": "g", "model": "gemini-2.5-pro", "maxIterations": 2, "agent": "gemini",
         "permissionMode": "yolo", "extraArgs": ["--include-directories", "docs"]}
    )  # fmt: skip
    args = permission_args(mode)
    assert args == ("--approval-mode", "yolo", "--include-directories", "docs")
    settings = load_settings(tmp_path)
    adapter = adapter_for(settings, mode)
    assert isinstance(adapter.inner, GeminiAdapter)  # behind the door that masks secrets
    # The session id a loop may still hold is ignored: a new session each time; the workspace
    # is trusted for the run.
    argv = adapter.command(agent_request(tmp_path, resume_session="s-1", extra_args=args))
    assert argv == [
        "gemini", "-p", INSTRUCTION, "--output-format", "stream-json", "--model", "m",
        "--skip-trust", "--approval-mode", "yolo", "--include-directories", "docs",
    ]  # fmt: skip


# ---- end to end: `worker run` with fake executables -------------------------------------------

STATUS_BLOCK = """
def status_block(answer):
    block = ["=== AGENT STATUS ===", "STATUS: " + answer["status"],
             "REASON: " + answer.get("reason", ""), "==================="]
    return (answer.get("text", "Worked on it.") + "\\n\\n" + "\\n".join(block))


def record_call(stdin):
    with open(os.environ["FAKE_AGENT_SCRIPT"], encoding="utf-8") as handle:
        answers = json.load(handle)
    log = os.environ["FAKE_AGENT_LOG"]
    calls = 0
    if os.path.exists(log):
        with open(log, encoding="utf-8") as handle:
            calls = sum(1 for _ in handle)
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"argv": sys.argv[1:], "stdin": stdin}) + "\\n")
    return answers[min(calls, len(answers) - 1)]


def emit(obj):
    print(json.dumps(obj), flush=True)
"""

# Lines shaped like codex-exec-command-execution.jsonl (codex-cli 0.46.0).
FAKE_CODEX = (
    "import json, os, sys, uuid\n"
    + STATUS_BLOCK
    + """
argv = sys.argv[1:]
answer = record_call(sys.stdin.read())
if argv[:2] != ["exec", "--json"] or argv[-1] != "-":
    print("error: unexpected arguments", file=sys.stderr)
    sys.exit(2)
if "resume" in argv and answer.get("lost"):
    print("Error: no rollout found for thread id " + argv[-2], file=sys.stderr)
    sys.exit(1)
thread = argv[argv.index("resume") + 1] if "resume" in argv else str(uuid.uuid4())
emit({"type": "thread.started", "thread_id": thread})
emit({"type": "turn.started"})
emit({"type": "item.completed", "item": {"id": "item_0", "type": "reasoning",
      "text": "**Listing files**"}})
emit({"type": "item.started", "item": {"id": "item_1", "type": "command_execution",
      "command": "bash -lc ls", "aggregated_output": "", "status": "in_progress"}})
emit({"type": "item.completed", "item": {"id": "item_1", "type": "command_execution",
      "command": "bash -lc ls", "aggregated_output": "inbox\\n", "exit_code": 0,
      "status": "completed"}})
if "error" in answer:
    emit({"type": "error", "message": answer["error"]})
    emit({"type": "turn.failed", "error": {"message": answer["error"]}})
    sys.exit(1)
emit({"type": "item.completed", "item": {"id": "item_2", "type": "agent_message",
      "text": status_block(answer)}})
emit({"type": "turn.completed", "usage": {"input_tokens": 6086, "cached_input_tokens": 2944,
      "output_tokens": 223}})
"""
)

# Lines shaped like gemini-stream-edit-file.jsonl (Gemini CLI 0.11.0), with the user message.
FAKE_GEMINI = (
    "import json, os, sys, uuid\n"
    + STATUS_BLOCK
    + """
argv = sys.argv[1:]
stdin = sys.stdin.read()
answer = record_call(stdin)
if "-p" not in argv or argv[argv.index("--output-format") + 1] != "stream-json":
    print("error: unexpected arguments", file=sys.stderr)
    sys.exit(42)
emit({"type": "init", "timestamp": "2025-10-29T10:37:00.097Z", "session_id": str(uuid.uuid4()),
      "model": argv[argv.index("--model") + 1]})
emit({"type": "message", "role": "user", "content": stdin + "\\n\\n" + argv[argv.index("-p") + 1]})
emit({"type": "tool_use", "tool_name": "read_file", "tool_id": "read_file-1",
      "parameters": {"absolute_path": "/tmp/x.txt"}})
emit({"type": "tool_result", "tool_id": "read_file-1", "status": "success", "output": ""})
if "error" in answer:
    emit({"type": "error", "severity": "error", "message": answer["error"]})
    emit({"type": "result", "status": "error",
          "error": {"type": "Error", "message": answer["error"]}})
    sys.exit(1)
text = status_block(answer)
for start in range(0, len(text), 40):
    emit({"type": "message", "role": "assistant", "content": text[start:start + 40],
          "delta": True})
emit({"type": "result", "status": "success", "stats": {"total_tokens": 22257,
      "input_tokens": 21694, "output_tokens": 77, "duration_ms": 13099, "tool_calls": 1}})
"""
)


@dataclass
class FakeCli:
    """A fake agent executable answering from a script; `calls` reads what it was given."""

    script: Path
    log: Path

    def answers(self, *answers: dict[str, Any]) -> None:
        self.script.write_text(json.dumps(list(answers)), encoding="utf-8")

    @property
    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(params=["codex", "gemini"])
def agent(
    request: pytest.FixtureRequest,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """A workspace whose only mode runs the fake `codex` or `gemini` (reviewers off)."""
    name: str = request.param
    if sys.platform == "win32":
        pytest.skip("needs POSIX: the fake CLI is a shebang script")
    executable = tmp_path / "bin" / name
    executable.parent.mkdir(exist_ok=True)
    source = FAKE_CODEX if name == "codex" else FAKE_GEMINI
    executable.write_text(f"#!{sys.executable}\n{source}", encoding="utf-8")
    executable.chmod(0o755)
    mode: dict[str, Any] = {"id": f"{name}-mode", "model": f"{name}-model", "maxIterations": 3}
    mode["agent"] = name
    if name == "gemini":
        mode["permissionMode"] = "yolo"
    (workspace / "modes").mkdir()
    (workspace / "modes" / "modes.json").write_text(json.dumps({"modes": [mode]}))
    monkeypatch.setenv(f"WORKER_{name.upper()}_BIN", str(executable))
    monkeypatch.setenv("FAKE_AGENT_SCRIPT", str(tmp_path / "answers.json"))
    monkeypatch.setenv("FAKE_AGENT_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    return name


@pytest.fixture
def fake(tmp_path: Path, agent: str) -> FakeCli:
    return FakeCli(tmp_path / "answers.json", tmp_path / "calls.jsonl")


def iterations(ws: Path) -> list[tuple[str, str | None, int]]:
    db = sqlite3.connect(state_of(ws) / "worker.db")
    try:
        return db.execute(
            "SELECT status, reason_code, input_tokens FROM iterations ORDER BY id"
        ).fetchall()
    finally:
        db.close()


def test_success_on_the_first_iteration(agent: str, fake: FakeCli, workspace: Path) -> None:
    fake.answers({"status": "success", "reason": "done"})
    write_message(workspace, "msg-1", subject="Fix the parser")
    report = run_once(load_settings(workspace), RunOptions())
    assert report.outcome.value == "success", report.reason
    assert (report.modes, report.iterations) == ([f"{agent}-mode"], 1)
    assert iterations(workspace) == [("success", None, 21694 if agent == "gemini" else 6086)]
    call = fake.calls[0]
    assert "Please do the thing." in call["stdin"] and "=== AGENT STATUS ===" in call["stdin"]
    if agent == "codex":
        # The workspace is not a git repository; a codex mode edits in its sandbox.
        assert call["argv"] == ["exec", "--json", "--model", "codex-model",
                                "--skip-git-repo-check", "--sandbox", "workspace-write",
                                "--config", 'approval_policy="never"', "-"]  # fmt: skip
    else:
        assert call["argv"][:2] == ["-p", INSTRUCTION]
        assert call["argv"][-2:] == ["--approval-mode", "yolo"]
    assert (workspace / "inbox" / "done" / "msg-1.json").exists()


def test_continue_then_success(agent: str, fake: FakeCli, workspace: Path) -> None:
    """Codex resumes its thread, which holds the task, the instructions and its answer: the
    prompt carries only what is new. Gemini starts a new session: the prompt carries all of
    it again, the previous answer quoted."""
    fake.answers({"status": "continue", "reason": "step 1"}, {"status": "success"})
    write_message(workspace, "msg-2")
    report = run_once(load_settings(workspace), RunOptions())
    assert report.outcome.value == "success" and report.iterations == 2
    assert [row[0] for row in iterations(workspace)] == ["continue", "success"]
    first, second = fake.calls
    again = ("step 1", "Please do the thing.", "=== AGENT STATUS ===")
    assert [words in second["stdin"] for words in again] == [agent == "gemini"] * 3
    if agent == "codex":
        assert "resume" not in first["argv"]
        index = second["argv"].index("resume")
        thread = second["argv"][index + 1]
        assert second["argv"][index:] == ["resume", thread, "-"] and len(thread) == 36
    else:
        assert "--resume" not in second["argv"]


def test_an_error_event_is_an_agent_error_iteration(
    agent: str, fake: FakeCli, workspace: Path
) -> None:
    fake.answers({"error": "shared rollout token budget exhausted"}, {"status": "success"})
    write_message(workspace, "msg-3")
    report = run_once(load_settings(workspace), RunOptions())
    assert report.outcome.value == "success" and report.iterations == 2
    assert [row[:2] for row in iterations(workspace)] == [
        ("continue", "AGENT_ERROR"),
        ("success", None),
    ]
    assert "AGENT_ERROR" in report.reason_codes
    # The iteration's reason is the CLI's own error message, not a generic subtype.
    db = sqlite3.connect(state_of(workspace) / "worker.db")
    (reason,) = db.execute("SELECT reason FROM iterations ORDER BY id LIMIT 1").fetchone()
    db.close()
    assert reason == "agent_error: shared rollout token budget exhausted"
    # The failed run's thread is not resumed: the next iteration starts afresh.
    assert "resume" not in fake.calls[1]["argv"]
    assert "shared rollout token budget exhausted" in fake.calls[1]["stdin"]


@pytest.mark.parametrize("agent", ["codex"], indirect=True)
def test_a_codex_thread_that_cannot_be_resumed_starts_afresh(
    agent: str, fake: FakeCli, workspace: Path
) -> None:
    """A resume that fails before any thread starts is a lost session: the same iteration runs
    again without `resume` (SESSION_MISSING_FRESH_START), and is not counted as a failure."""
    fake.answers({"status": "continue"}, {"lost": True}, {"status": "success"})
    write_message(workspace, "msg-4")
    report = run_once(load_settings(workspace), RunOptions())
    assert report.outcome.value == "success" and report.iterations == 2
    assert "SESSION_MISSING_FRESH_START" in report.reason_codes
    assert ["resume" in call["argv"] for call in fake.calls] == [False, True, False]


@pytest.mark.parametrize("agent", ["codex"], indirect=True)
def test_escalating_to_another_agent_does_not_resume_the_first_ones_session(
    agent: str, fake: FakeCli, workspace: Path, fake_claude: Any
) -> None:
    """A claude mode escalating to a codex mode: codex starts a thread of its own instead of
    being handed claude's session id (and failing once)."""
    modes = json.loads((workspace / "modes" / "modes.json").read_text())
    modes["modes"].insert(
        0,
        {
            "id": "claude-first",
            "model": "haiku",
            "maxIterations": 2,
            "default": True,
            "escalation": {"triggerMode": "codex-mode"},
        },
    )
    (workspace / "modes" / "modes.json").write_text(json.dumps(modes))
    fake_claude.answers({"status": "escalate", "reason": "needs codex", "text": "Tried sed."})
    fake.answers({"status": "success"})
    write_message(workspace, "msg-switch")
    report = run_once(load_settings(workspace), RunOptions())
    assert report.outcome.value == "success"
    assert report.modes == ["claude-first", "codex-mode"]
    assert "resume" not in fake.calls[0]["argv"]
    assert "SESSION_MISSING_FRESH_START" not in report.reason_codes
    # A fresh session after escalation: the briefing, with the answer it does not hold.
    prompt = fake.calls[0]["stdin"]
    assert "Please do the thing." in prompt and "=== AGENT STATUS ===" in prompt
    assert "## Your previous iteration ended with" in prompt and "Tried sed." in prompt
