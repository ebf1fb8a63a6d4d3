"""The real Codex CLI (tests/realcli, codex 0.169) driven offline against a scripted OpenAI
Responses API on 127.0.0.1 (a custom model provider in CODEX_HOME/config.toml): what the adapter
and `worker run` make of a real edit, a resumed thread, a hung API, a bad key, an overloaded API
and a missing binary. These are what tell us when Codex changes its stream."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fakes import openai_api as api
from tests.fakes.openai_api import FakeOpenAIAPI
from tests.realcli_support import one_mode_workspace, processes_with_env, real_cli, status_text
from worker.agents.codex import CodexAdapter
from worker.cli.app import app
from worker.config import load_settings
from worker.models import AgentRequest, InfraKind
from worker.modes import load_modes, permission_args
from worker.run.runner import RunOptions, run_once

from .conftest import run_worker, state_of, write_message

pytestmark = pytest.mark.slow

MODEL = "gpt-5-codex"


@pytest.fixture
def openai(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIAPI]:
    """The scripted API, and a CODEX_HOME whose model provider points at it. Codex's own request
    retries are cut to 1 so that a failing API is quick; its stream retries keep their default
    (5), which the adapter cuts at the 3rd."""
    server = FakeOpenAIAPI().start()
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(
        'model_provider = "scripted"\n'
        "[model_providers.scripted]\n"
        'name = "scripted"\n'
        f'base_url = "{server.url}"\n'
        'env_key = "SCRIPTED_OPENAI_KEY"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 1\n"
    )
    monkeypatch.setenv("CODEX_HOME", str(home))
    # Codex makes its `codex-linux-sandbox` helper under CODEX_HOME, and refuses to where that
    # lies in the temporary folder: then, with a system bubblewrap installed, every command of
    # its workspace-write sandbox fails ("bwrap: execvp codex-linux-sandbox"). A CODEX_HOME of
    # the user's lies outside it; here the temporary folder Codex sees is moved beside it.
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setenv("SCRIPTED_OPENAI_KEY", "sk-test-scripted")
    yield server
    server.close()


@pytest.fixture
def codex(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = real_cli("codex")
    one_mode_workspace(workspace, "codex", model=MODEL)
    monkeypatch.setenv("WORKER_CODEX_BIN", str(path))
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    return path


def _request(workspace: Path, timeout_s: float = 120, **extra: object) -> AgentRequest:
    mode = load_modes(workspace / "modes" / "modes.json").get("codex-mode")
    return AgentRequest(
        prompt="Do the task.",
        model=MODEL,
        cwd=workspace,
        timeout_s=timeout_s,
        extra_args=permission_args(mode),
        **extra,  # type: ignore[arg-type]
    )


def _iterations(workspace: Path) -> list[tuple[str, str | None]]:
    db = sqlite3.connect(state_of(workspace) / "worker.db")
    try:
        return db.execute("SELECT status, reason_code FROM iterations ORDER BY id").fetchall()
    finally:
        db.close()


def test_a_real_edit_then_success(codex: Path, openai: FakeOpenAIAPI, workspace: Path) -> None:
    """A shipped-style codex mode (no permissionMode) runs in the workspace-write sandbox: the
    command the model asks for writes the file, and the STATUS block ends the task."""
    openai.play(
        api.call("exec_command", {"cmd": "echo hello > hello.txt"}),
        api.text(status_text("success", "wrote hello.txt")),
    )
    write_message(workspace, "msg-1", subject="Write hello.txt")
    report = run_once(load_settings(workspace), RunOptions())
    assert report.outcome.value == "success", report.reason
    assert (workspace / "hello.txt").read_text() == "hello\n"
    assert _iterations(workspace) == [("success", None)]
    # The command's result went back to the model in the same turn.
    outputs = [item for item in openai.inputs(1) if item.get("type") == "function_call_output"]
    assert len(outputs) == 1 and "exited with code 0" in outputs[0]["output"]
    assert openai.model_requests[0].headers["authorization"] == "Bearer sk-test-scripted"


def test_the_next_iteration_resumes_the_thread(
    codex: Path, openai: FakeOpenAIAPI, workspace: Path
) -> None:
    """Iteration 2 runs `codex exec ... resume <thread>`: its request carries iteration 1's
    conversation (the prompt and the answer), then the new prompt, which carries only what
    is new (the thread holds the task and the STATUS instructions)."""
    openai.play(
        api.text(status_text("continue", "step one done", "First answer.")),
        api.text(status_text("success", "all done")),
    )
    write_message(workspace, "msg-2")
    report = run_once(load_settings(workspace), RunOptions())
    assert report.outcome.value == "success" and report.iterations == 2, report.reason
    history = openai.inputs(1)
    # A fresh thread would send user messages only: the model's own answer is the resume.
    answers = [i for i in history if i.get("type") == "message" and i.get("role") == "assistant"]
    assert len(answers) == 1 and "First answer." in json.dumps(answers[0])
    where = history.index(answers[0])
    before, after = json.dumps(history[:where]), json.dumps(history[where + 1 :])
    assert "Please do the thing." in before  # iteration 1's prompt, then its answer,
    assert "iteration 2 of" in after  # then iteration 2's prompt, without the task again
    assert "Please do the thing." not in after and "=== AGENT STATUS ===" not in after


def test_wait_approve_resume_carries_the_note_into_the_resumed_thread(
    codex: Path, openai: FakeOpenAIAPI, workspace: Path, cli: CliRunner
) -> None:
    openai.play(
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
    history = openai.inputs(1)
    assert "use the blue one" in json.dumps(history[-1])  # the new prompt carries the note
    assert any(item.get("role") == "assistant" for item in history)  # in the same thread


def test_a_hung_api_is_timed_out_and_no_process_is_left(
    codex: Path, openai: FakeOpenAIAPI, workspace: Path
) -> None:
    openai.play(api.hang())
    result = CodexAdapter(str(codex)).run(_request(workspace, timeout_s=8))
    assert result.timed_out and result.is_error and result.infra is None
    assert len(openai.model_requests) >= 1
    assert processes_with_env("CODEX_HOME", os.environ["CODEX_HOME"]) == []


def test_a_bad_key_ends_the_run_with_78_and_leaves_the_task(
    codex: Path, openai: FakeOpenAIAPI, workspace: Path
) -> None:
    """401 on every call: Codex is ended at its first retry; the message stays unread, nothing
    is counted, and the reason says authentication and which key."""
    openai.play(api.error(401, "Incorrect API key provided: sk-test***.", "invalid_api_key"))
    message = write_message(workspace, "msg-1")
    done = run_worker(workspace, "run", "--json")
    assert done.returncode == 78, done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "stopped" and report["infra"] == "auth"
    assert report["reason"].startswith("Codex could not authenticate: unexpected status 401")
    assert "Incorrect API key provided" in report["reason"] and "OPENAI_API_KEY" in report["reason"]
    assert json.loads(message.read_text())["status"] == "unread"
    for command in ("log", "why"):
        shown = run_worker(workspace, command)
        assert "Codex could not authenticate" in shown.stdout, command
    assert _iterations(workspace) == []
    assert len(openai.model_requests) <= 2  # not Codex's 12


@pytest.mark.parametrize("status", [529, 503])
def test_an_overloaded_api_leaves_the_task_waiting(
    codex: Path, openai: FakeOpenAIAPI, workspace: Path, status: int
) -> None:
    """Codex is ended at its 3rd retry; the task waits (timed), no iteration is counted."""
    openai.play(api.error(status, "Overloaded", "overloaded"))
    write_message(workspace, "msg-1")
    done = run_worker(workspace, "run", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "waiting" and report["iterations"] == 0
    assert report["reason_codes"][-1] == "AGENT_API_UNAVAILABLE"
    assert report["reason"].startswith("Codex could not reach the model API: ")
    assert f"(HTTP {status})" in report["reason"]
    state = json.loads(Path(report["wait_state"]).read_text())
    assert state["resumeWhen"] == "time"
    assert datetime.fromisoformat(state["resumeAt"]) > datetime.now(UTC)
    assert _iterations(workspace) == []
    # Codex alone would make (1 + 1) x (5 + 1) = 12 requests.
    assert len(openai.model_requests) < 12


def test_no_network_ends_codex_at_its_third_reconnect(
    codex: Path, openai: FakeOpenAIAPI, workspace: Path
) -> None:
    """With the API's port closed Codex reconnects for ever, "waiting for network"."""
    openai.close()
    result = CodexAdapter(str(codex)).run(_request(workspace))
    assert result.infra is not None and result.infra.kind is InfraKind.UNAVAILABLE
    assert result.stopped == f"infrastructure: {result.infra.message}" and not result.timed_out
    assert "Connection failed" in result.infra.message


def test_a_missing_binary_exits_78_and_touches_no_task(
    codex: Path, openai: FakeOpenAIAPI, workspace: Path
) -> None:
    message = write_message(workspace, "msg-1")
    before = message.read_bytes()
    done = run_worker(workspace, "run", env={"WORKER_CODEX_BIN": str(workspace / "no-codex")})
    assert done.returncode == 78
    assert "Codex cannot start" in done.stderr and "codex_bin" in done.stderr
    assert message.read_bytes() == before
    assert openai.requests == []
