"""The real Gemini CLI (tests/realcli, 0.61) driven offline against a scripted Gemini API on
127.0.0.1 (`GOOGLE_GEMINI_BASE_URL`), with folder trust on as many users have it: what the
adapter and `worker run` make of a real edit, a second iteration, a hung API, a bad key, an
overloaded API and a missing binary. These are what tell us when Gemini CLI changes its stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fakes import gemini_api as api
from tests.fakes.gemini_api import FakeGeminiAPI
from tests.realcli_support import one_mode_workspace, processes_with_env, real_cli, status_text
from worker.agents.gemini import GeminiAdapter
from worker.cli.app import app
from worker.config import load_settings
from worker.models import AgentRequest, AgentResult, InfraKind
from worker.process.proc import run_process
from worker.run.runner import RunOptions, run_once

from .conftest import run_worker, write_message

pytestmark = pytest.mark.slow

MODEL = "gemini-2.5-pro"


@pytest.fixture
def gemini_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGeminiAPI]:
    """The scripted API, and Gemini CLI's settings in a home of its own: an API key, and folder
    trust on (the workspace was never trusted interactively). The auth type is chosen in the
    settings: a base URL alone selects the `gateway` type, which a headless run refuses."""
    server = FakeGeminiAPI().start()
    home = tmp_path / "gemini-home"
    (home / ".gemini").mkdir(parents=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": True}}
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    monkeypatch.setenv("GEMINI_CLI_HOME", str(home))
    monkeypatch.setenv("GEMINI_API_KEY", "test-gemini-key")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base)
    monkeypatch.delenv("GEMINI_CLI_TRUST_WORKSPACE", raising=False)
    yield server
    server.close()


@pytest.fixture
def gemini(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = real_cli("gemini")
    one_mode_workspace(workspace, "gemini", model=MODEL, permissionMode="yolo")
    monkeypatch.setenv("WORKER_GEMINI_BIN", str(path))
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    return path


def _run(gemini: Path, workspace: Path, timeout_s: float = 120, **extra: object) -> AgentResult:
    request = AgentRequest(
        prompt="Do the task.",
        model=MODEL,
        cwd=workspace,
        timeout_s=timeout_s,
        extra_args=("--approval-mode", "yolo"),
        **extra,  # type: ignore[arg-type]
    )
    return GeminiAdapter(str(gemini)).run(request)


def _texts(contents: list[dict[str, object]]) -> str:
    return json.dumps(contents)


def test_a_real_edit_then_success_in_a_folder_never_trusted(
    gemini: Path, gemini_api: FakeGeminiAPI, workspace: Path
) -> None:
    """`--skip-trust` lets the run start and keeps `yolo`: the write is not refused."""
    target = workspace / "hello.txt"
    gemini_api.play(
        api.call("write_file", {"file_path": str(target), "content": "hello\n"}),
        api.text(status_text("success", "wrote hello.txt")),
    )
    write_message(workspace, "msg-1", subject="Write hello.txt")
    report = run_once(load_settings(workspace), RunOptions())
    assert report.outcome.value == "success", report.reason
    assert target.read_text() == "hello\n"
    # The tool's result went back to the model in the same session.
    second = gemini_api.contents(1)
    assert "functionResponse" in _texts(second) and "write_file" in _texts(second)
    assert gemini_api.model_requests[0].headers["x-goog-api-key"] == "test-gemini-key"


def test_without_skip_trust_the_same_setup_refuses_to_start(
    gemini: Path, gemini_api: FakeGeminiAPI, workspace: Path
) -> None:
    """The control for the test above: the fixture's folder trust is real, and the adapter's
    `--skip-trust` is what gets past it."""
    argv = GeminiAdapter(str(gemini)).command(
        AgentRequest(prompt="x", model=MODEL, cwd=workspace, timeout_s=60)
    )
    argv.remove("--skip-trust")
    proc = run_process([*argv, "--approval-mode", "yolo"], cwd=workspace, timeout_s=60)
    assert proc.exit_code == 55 and "not running in a trusted directory" in proc.stderr_tail
    assert "overridden" in proc.stderr_tail  # yolo silently lowered to default
    assert gemini_api.model_requests == []


def test_the_next_iteration_is_a_new_session_with_the_history_in_its_prompt(
    gemini: Path, gemini_api: FakeGeminiAPI, workspace: Path
) -> None:
    gemini_api.play(
        api.text(status_text("continue", "step one done", "First answer.")),
        api.text(status_text("success", "all done")),
    )
    write_message(workspace, "msg-2")
    report = run_once(load_settings(workspace), RunOptions())
    assert report.outcome.value == "success" and report.iterations == 2, report.reason
    second = gemini_api.contents(1)
    # A new session: no model turn is replayed; the worker's prompt carries the last STATUS.
    assert [item["role"] for item in second] == ["user"] * len(second)
    assert "step one done" in _texts(second) and "Please do the thing." in _texts(second)


def test_wait_approve_resume_carries_the_note_into_the_new_session(
    gemini: Path, gemini_api: FakeGeminiAPI, workspace: Path, cli: CliRunner
) -> None:
    gemini_api.play(
        api.text(
            status_text("wait", "which colour?", wait_for="the colour", resume_when="user_approval")
        ),
        api.text(status_text("success", "painted it")),
    )
    write_message(workspace, "msg-3")
    first = run_once(load_settings(workspace), RunOptions())
    assert first.outcome.value == "waiting", first.reason
    approved = cli.invoke(
        app, ["waits", "approve", "msg-3", "--note", "use the blue one", "-w", str(workspace)]
    )
    assert approved.exit_code == 0, approved.output
    second = run_once(load_settings(workspace), RunOptions())
    assert second.outcome.value == "success", second.reason
    assert "use the blue one" in _texts(gemini_api.contents(1))


def test_a_hung_api_is_timed_out_and_no_process_is_left(
    gemini: Path, gemini_api: FakeGeminiAPI, workspace: Path
) -> None:
    """Gemini CLI relaunches itself in a child node process: the whole tree goes."""
    gemini_api.play(api.hang())
    result = _run(gemini, workspace, timeout_s=10)
    assert result.timed_out and result.is_error and result.infra is None
    assert len(gemini_api.model_requests) >= 1
    assert processes_with_env("GOOGLE_GEMINI_BASE_URL", gemini_api.base) == []


def test_a_bad_key_ends_the_run_with_78_and_leaves_the_task(
    gemini: Path, gemini_api: FakeGeminiAPI, workspace: Path
) -> None:
    gemini_api.play(api.error(401, "API key not valid. Please pass a valid API key."))
    message = write_message(workspace, "msg-1")
    done = run_worker(workspace, "run", "--json")
    assert done.returncode == 78, done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "stopped" and report["infra"] == "auth"
    assert report["reason"].startswith("Gemini CLI could not authenticate: ")
    assert "API key not valid" in report["reason"] and "GEMINI_API_KEY" in report["reason"]
    assert json.loads(message.read_text())["status"] == "unread"
    for command in ("log", "why"):
        shown = run_worker(workspace, command)
        assert "Gemini CLI could not authenticate" in shown.stdout, command
    assert report["iterations"] == 0
    assert len(gemini_api.model_requests) == 1


def test_an_overloaded_api_leaves_the_task_waiting(
    gemini: Path, gemini_api: FakeGeminiAPI, workspace: Path
) -> None:
    """Gemini CLI would try 10 times over minutes, saying so only on stderr: it is ended at its
    3rd attempt, and the task waits (timed) without an iteration counted."""
    gemini_api.play(api.error(503, "The model is overloaded. Please try again later."))
    write_message(workspace, "msg-1")
    done = run_worker(workspace, "run", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "waiting" and report["iterations"] == 0
    assert report["reason_codes"][-1] == "AGENT_API_UNAVAILABLE"
    assert report["reason"].startswith(
        "Gemini CLI could not reach the model API: The model is overloaded. Please try again "
        "later. (3 attempts) (HTTP 503)"
    )
    state = json.loads(Path(report["wait_state"]).read_text())
    assert state["resumeWhen"] == "time"
    assert 3 <= len(gemini_api.model_requests) < 10


def test_no_network_ends_gemini_at_its_third_attempt(
    gemini: Path, gemini_api: FakeGeminiAPI, workspace: Path
) -> None:
    gemini_api.close()
    result = _run(gemini, workspace)
    assert result.infra is not None and result.infra.kind is InfraKind.UNAVAILABLE
    assert result.stopped == f"infrastructure: {result.infra.message}" and not result.timed_out
    assert "fetch failed" in result.infra.message


def test_a_missing_binary_exits_78_and_touches_no_task(
    gemini: Path, gemini_api: FakeGeminiAPI, workspace: Path
) -> None:
    message = write_message(workspace, "msg-1")
    before = message.read_bytes()
    done = run_worker(workspace, "run", env={"WORKER_GEMINI_BIN": str(workspace / "no-gemini")})
    assert done.returncode == 78
    assert "Gemini CLI cannot start" in done.stderr and "gemini_bin" in done.stderr
    assert message.read_bytes() == before
    assert gemini_api.requests == []
