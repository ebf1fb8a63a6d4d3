"""Codex and Gemini CLI infrastructure failures read from the lines the real CLIs print (copied
from codex 0.169 and Gemini CLI 0.61 runs against a scripted API): fast, without the CLIs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from worker.agents import failures
from worker.agents.claude import ClaudeAdapter
from worker.agents.codex import CodexAdapter, CodexCollector
from worker.agents.gemini import GeminiAdapter, GeminiCollector
from worker.models import AgentRequest, AgentResult, InfraKind

URL = "url: http://127.0.0.1:34693/v1/responses"


def _codex_error(message: str) -> str:
    return json.dumps({"type": "error", "message": message})


@pytest.mark.parametrize(
    ("text", "kind", "status"),
    [
        ("unexpected status 401 Unauthorized: Incorrect API key provided", InfraKind.AUTH, 401),
        ('[API Error: {"error":{"code":403,"message":"denied"}}]', InfraKind.AUTH, 403),
        ("unexpected status 529 <unknown status code>: Overloaded", InfraKind.UNAVAILABLE, 529),
        ("The model is overloaded. Please try again later.", InfraKind.UNAVAILABLE, None),
        ("error sending request for url (http://127.0.0.1:9/v1/responses)", InfraKind.UNAVAILABLE,
         None),
        ("Quota exceeded. Check your plan and billing details.", InfraKind.USAGE_LIMIT, None),
        ("You've hit your usage limit. Upgrade to Pro", InfraKind.USAGE_LIMIT, None),
    ],
)  # fmt: skip
def test_error_texts_are_classified(text: str, kind: InfraKind, status: int | None) -> None:
    found = failures.classify("Codex", text, key_setting="OPENAI_API_KEY")
    assert found is not None and found.kind is kind and found.http_status == status
    assert found.message.startswith("Codex ") and text in found.message


def test_a_key_echoed_by_the_api_is_hidden() -> None:
    key = "sk-proj-abcdefghij1234567890XYZ"
    text = f"unexpected status 401 Unauthorized: Incorrect API key provided: {key}"
    found = failures.classify("Codex", text)
    assert found is not None and "abcdefghij" not in found.message and "***" in found.message


def test_a_task_error_is_not_infrastructure() -> None:
    assert failures.classify("Codex", "shared rollout token budget exhausted") is None
    assert failures.classify("Codex", "patch failed: hunk 2 does not apply") is None


def test_codex_stops_at_the_first_401_retry() -> None:
    collector = CodexCollector()
    assert collector.feed(json.dumps({"type": "thread.started", "thread_id": "t"})) is None
    stop = collector.feed(
        _codex_error(f"Reconnecting... 1/5 (unexpected status 401 Unauthorized: bad key, {URL})")
    )
    assert stop == (
        "infrastructure: Codex could not authenticate: unexpected status 401 Unauthorized: "
        "bad key (HTTP 401)"
    )
    result = collector.result(None)
    assert result.is_error and result.infra is not None and result.infra.kind is InfraKind.AUTH


def test_codex_lets_two_retries_of_an_overloaded_api_pass_and_stops_the_third() -> None:
    collector = CodexCollector()
    lines = [
        _codex_error(
            f"Reconnecting... {n}/5 (unexpected status 503 Service Unavailable: busy, {URL})"
        )
        for n in (1, 2, 3)
    ]
    assert [collector.feed(line) for line in lines[:2]] == [None, None]
    assert collector.feed(lines[2]) == (
        "infrastructure: Codex could not reach the model API: unexpected status 503 Service "
        "Unavailable: busy (HTTP 503)"
    )


def test_codex_waiting_for_the_network_is_stopped_at_the_third_retry() -> None:
    """Without a network Codex reconnects for ever, without a count."""
    collector = CodexCollector()
    line = _codex_error(
        "Reconnecting... waiting for network (Connection failed: error sending request)"
    )
    assert [collector.feed(line) for _ in range(3)] == [
        None,
        None,
        "infrastructure: Codex could not reach the model API: Connection failed: error sending "
        "request",
    ]


def test_codex_recovers_after_a_retry_without_an_infra_failure() -> None:
    collector = CodexCollector()
    collector.feed(_codex_error(f"Reconnecting... 1/5 (unexpected status 503 x, {URL})"))
    collector.feed(json.dumps({"type": "turn.completed", "usage": {"input_tokens": 1}}))
    result = collector.result(0)
    assert not result.is_error and result.infra is None


def test_codex_quota_is_a_usage_limit_wait() -> None:
    collector = CodexCollector()
    message = "Quota exceeded. Check your plan and billing details."
    collector.feed(_codex_error(message))
    collector.feed(json.dumps({"type": "turn.failed", "error": {"message": message}}))
    result = collector.result(1)
    assert result.usage_limit_hit and result.infra is not None
    assert result.infra.kind is InfraKind.USAGE_LIMIT


def test_gemini_stderr_retries_stop_at_the_third_attempt() -> None:
    collector = GeminiCollector()
    dump = '_ApiError: {"error":{"code":503,"message":"The model is overloaded.","status":"x"}}'
    assert collector.watch("Attempt 1 failed with status 503. Retrying with backoff...") is None
    assert collector.watch(dump) is None
    assert collector.watch("Attempt 2 failed with status 503. Retrying with backoff...") is None
    assert collector.watch("Attempt 3 failed with status 503. Retrying with backoff...") == (
        "infrastructure: Gemini CLI could not reach the model API: The model is overloaded. "
        "(3 attempts) (HTTP 503)"
    )


def test_gemini_without_a_network_stops_at_the_third_attempt() -> None:
    collector = GeminiCollector()
    line = "Attempt {} failed. Retrying with backoff... Error: exception TypeError: fetch failed"
    assert collector.watch(line.format(1)) is None and collector.watch(line.format(2)) is None
    assert collector.watch(line.format(3)) == (
        "infrastructure: Gemini CLI could not reach the model API: exception TypeError: fetch "
        "failed (3 attempts)"
    )


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "cli"
    path.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    path.chmod(0o755)
    return path


def test_a_crash_without_a_result_is_a_cli_crash(tmp_path: Path) -> None:
    """A non-zero exit with nothing on stdout: the CLI broke, not the task."""
    crash = _script(tmp_path, "print('TypeError: x is undefined', file=sys.stderr); sys.exit(3)")
    request = AgentRequest(prompt="x", model="m", cwd=tmp_path, timeout_s=30)
    for adapter in (CodexAdapter(str(crash)), GeminiAdapter(str(crash))):
        result = adapter.run(request)
        assert result.infra is not None and result.infra.kind is InfraKind.CLI_CRASH
        assert result.infra.message.endswith(
            "exited with code 3 without a result: TypeError: x is undefined"
        )


def test_gemini_exit_41_is_an_authentication_failure(tmp_path: Path) -> None:
    cli = _script(
        tmp_path,
        "print('When using Gemini API, you must specify the GEMINI_API_KEY environment "
        "variable.', file=sys.stderr); sys.exit(41)",
    )
    result = GeminiAdapter(str(cli)).run(
        AgentRequest(prompt="x", model="m", cwd=tmp_path, timeout_s=30)
    )
    assert result.infra is not None and result.infra.kind is InfraKind.AUTH
    assert result.infra.setting == "GEMINI_API_KEY" and "GEMINI_API_KEY" in result.infra.message


def test_gemini_quota_is_a_usage_limit_wait(tmp_path: Path) -> None:
    """Gemini CLI's message after a 429 with a daily quota (RESOURCE_EXHAUSTED)."""
    line = json.dumps(
        {
            "type": "result",
            "status": "error",
            "error": {"type": "unknown", "message": "[API Error: Quota exceeded for quota metric "
                      "'Generate Content API requests per day']"},
        }
    )  # fmt: skip
    cli = _script(tmp_path, f"print({line!r}); sys.exit(1)")
    result = GeminiAdapter(str(cli)).run(
        AgentRequest(prompt="x", model="m", cwd=tmp_path, timeout_s=30)
    )
    assert result.usage_limit_hit and result.infra is not None
    assert result.infra.kind is InfraKind.USAGE_LIMIT


def _resumed_claude(tmp_path: Path, said: str, stderr: str, exit_code: int) -> AgentResult:
    """A Claude run resumed from session `s-1` whose tool output says `said` (a raw U+2028
    kept raw in its JSON line, as Claude Code writes it)."""
    stream = [
        {"type": "system", "subtype": "init", "session_id": "s-1", "model": "m"},
        {
            "type": "user",
            "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": said}]},
        },
        {"type": "result", "subtype": "success", "is_error": False, "result": "ok"},
    ]
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in stream)
    cli = _script(
        tmp_path,
        f"sys.stdout.buffer.write({text.encode()!r}); sys.stdout.flush()\n"
        f"print({stderr!r}, file=sys.stderr); sys.exit({exit_code})",
    )
    request = AgentRequest(prompt="x", model="m", cwd=tmp_path, timeout_s=30, resume_session="s-1")
    return ClaudeAdapter(str(cli)).run(request)


def test_a_tool_output_saying_the_session_is_gone_does_not_restart_the_iteration(
    tmp_path: Path,
) -> None:
    """Words a file or a web page put in a tool's output are not the CLI failing to resume:
    neither cut out of their JSON line at a raw U+2028 nor on a run that did not fail."""
    said = "page:\u2028No conversation found with session ID: s-1"
    assert not _resumed_claude(tmp_path, said, "", 1).session_missing
    assert not _resumed_claude(tmp_path, said, said, 0).session_missing
    gone = _resumed_claude(tmp_path, "", "No conversation found with session ID: s-1", 1)
    assert gone.session_missing
