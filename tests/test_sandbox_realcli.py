"""The agent in a box, with the real agent CLIs (tests/realcli) and the sandbox runtime pinned
beside them (`srt`), each CLI driven by its scripted model API on 127.0.0.1 (allow-listed as
its model's host): with the default settings, an in-tree edit succeeds and the task finishes,
while the four attacks (read a key in ~/.ssh, write outside the tree, write worker's state
folder, connect to a listener on 127.0.0.2) all fail, run by the CLI's own shell tool in its
unattended permission mode, and the key never reaches the model, the logs or the database.

Skipped, with the reason, where this machine has no runtime (or bubblewrap cannot make
namespaces); in CI (`CI` or `SANDBOX_REQUIRED` set, as `.ci/run` does) that fails instead.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import status_block
from tests.fakes import gemini_api as gemini_fake
from tests.fakes import openai_api as openai_fake
from tests.fakes.anthropic_api import AnthropicAPI, text, tool_use
from tests.fakes.gemini_api import FakeGeminiAPI
from tests.fakes.openai_api import FakeOpenAIAPI
from tests.realcli_support import one_mode_workspace, real_cli, status_text
from tests.sandbox_support import attack_commands, leaks, listener, plant_secret, sandbox_runtime
from worker.config import load_settings
from worker.run.runner import RunOptions, run_once
from worker.state.run_log import run_detail

from .conftest import state_of, write_message

pytestmark = pytest.mark.slow


@pytest.fixture
def boxed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The default [sandbox] settings, the pinned runtime, a home with a key in ~/.ssh, a
    folder outside the tree and a listener on 127.0.0.2."""
    srt = sandbox_runtime()
    monkeypatch.delenv("WORKER_SANDBOX__MODE")  # the defaults, not the suite's
    monkeypatch.delenv("WORKER_SANDBOX__UNTRUSTED_MODE")
    monkeypatch.setenv("WORKER_SANDBOX__SRT_BIN", str(srt))
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    plant_secret(home)
    outside = tmp_path / "outside"
    outside.mkdir()
    return {"home": home, "outside": outside}


@pytest.fixture
def port() -> Iterator[tuple[int, list[bytes]]]:
    with listener() as found:
        yield found


def shell(command: str) -> str:
    """The attack's commands with `python3` as this test's own (PATH may not have one)."""
    return command.replace("python3 ", f"{sys.executable} ")


def run_and_check(workspace: Path, boxed: dict[str, Any], got: list[bytes]) -> str:
    """One task; it succeeds in the box, in-tree, and every attack failed. Returns what the
    run said, for the leak check."""
    write_message(workspace, "msg-1", subject="Write hello.txt")
    settings = load_settings(workspace)
    report = run_once(settings, RunOptions())
    assert report.outcome.value == "success", report.reason
    assert (workspace / "hello.txt").read_text() == "hello\n"
    assert not (boxed["outside"] / "escape.txt").exists()
    assert not (settings.state / "pwned.txt").exists()
    assert got == []
    detail = run_detail(settings, 1)
    assert [it["sandbox"] for it in detail["iterations"]] == ["srt"]
    refused = "\n".join(detail["iterations"][0]["sandbox_refused"])
    # The proxy's refusal; the writes find no folder (the test's folders are under /tmp,
    # which the box empties), so none is recorded as refused: escape.txt is checked above.
    assert "blocked" in refused
    return json.dumps(detail)


# How a write refused by the box reads: read-only, denied, or (under /tmp, which the box
# empties, where the test's folders are) no such folder.
REFUSED_WRITE = ("Read-only file system", "Permission denied", "No such file or directory")


# -- Claude Code -------------------------------------------------------------------------------
@pytest.fixture
def claude(
    workspace: Path, boxed: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[AnthropicAPI]:
    path = real_cli("claude")
    one_mode_workspace(
        workspace, "claude", model="claude-sonnet-4-5", permissionMode="bypassPermissions"
    )
    api = AnthropicAPI().start()
    for name, value in api.env(str(boxed["home"])).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WORKER_CLAUDE_BIN", str(path))
    monkeypatch.setenv("IS_SANDBOX", "1")  # bypassPermissions as root (CI) needs the CLI told
    yield api
    api.stop()


def test_claude_in_the_box(
    workspace: Path, boxed: dict[str, Any], claude: AnthropicAPI, port: tuple[int, list[bytes]]
) -> None:
    """Claude Code in `bypassPermissions`, its Bash tool running the four attacks, then its
    Write tool in the tree: the task succeeds, every attack fails, the key stays in the box."""
    commands = attack_commands(boxed["outside"], state_of(workspace), port[0])
    claude.script(
        *[tool_use("Bash", {"command": shell(c)}) for c in commands.values()],
        tool_use("Write", {"file_path": str(workspace / "hello.txt"), "content": "hello\n"}),
        text("Done.\n" + status_block("success", "wrote hello.txt")),
    )
    said = run_and_check(workspace, boxed, port[1])
    sent = json.dumps(claude.conversation_requests())
    assert any(no in sent for no in REFUSED_WRITE)  # the writes hit it
    assert leaks(state_of(workspace), sent, said) == []


def test_the_control_without_the_box_every_attack_succeeds(
    workspace: Path,
    boxed: dict[str, Any],
    claude: AnthropicAPI,
    port: tuple[int, list[bytes]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same attacks with `[sandbox] mode = "off"`: each one works, so the checks above
    can fail, and the show marks the iteration as not sandboxed."""
    monkeypatch.setenv("WORKER_SANDBOX__MODE", "off")
    commands = attack_commands(boxed["outside"], state_of(workspace), port[0])
    claude.script(
        *[tool_use("Bash", {"command": shell(c)}) for c in commands.values()],
        text("Done.\n" + status_block("success", "done")),
    )
    write_message(workspace, "msg-1")
    settings = load_settings(workspace)
    assert run_once(settings, RunOptions()).outcome.value == "success"
    assert (boxed["outside"] / "escape.txt").exists()
    assert (settings.state / "pwned.txt").exists()
    assert b"exfiltrated" in b"".join(port[1])
    found = leaks(settings.state, json.dumps(claude.conversation_requests()))
    assert "text 0" in found and any(place.endswith(".jsonl") for place in found)
    assert [it["sandbox"] for it in run_detail(settings, 1)["iterations"]] == [None]


# -- Codex -------------------------------------------------------------------------------------
@pytest.fixture
def codex(
    workspace: Path, boxed: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeOpenAIAPI]:
    """The scripted Responses API as Codex's model provider, and a mode as shipped (Codex's
    own `workspace-write`, which the box replaces: bubblewrap cannot run nested)."""
    path = real_cli("codex")
    one_mode_workspace(workspace, "codex", model="gpt-5-codex")
    server = FakeOpenAIAPI().start()
    home = boxed["home"] / ".codex"
    home.mkdir()
    (home / "config.toml").write_text(
        'model_provider = "scripted"\n[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "{server.url}"\nenv_key = "SCRIPTED_OPENAI_KEY"\nwire_api = "responses"\n'
        "request_max_retries = 1\n"
    )
    monkeypatch.setenv("CODEX_HOME", str(home))
    monkeypatch.setenv("SCRIPTED_OPENAI_KEY", "sk-test-scripted")
    monkeypatch.setenv("WORKER_CODEX_BIN", str(path))
    yield server
    server.close()


def test_codex_in_the_box(
    workspace: Path, boxed: dict[str, Any], codex: FakeOpenAIAPI, port: tuple[int, list[bytes]]
) -> None:
    """Codex as shipped (no permissionMode), its exec_command tool running the four attacks
    and the in-tree edit: the task succeeds, every attack fails, the key stays in the box."""
    commands = attack_commands(boxed["outside"], state_of(workspace), port[0])
    codex.play(
        *[openai_fake.call("exec_command", {"cmd": shell(c)}) for c in commands.values()],
        openai_fake.call("exec_command", {"cmd": "echo hello > hello.txt"}),
        openai_fake.text(status_text("success", "wrote hello.txt")),
    )
    said = run_and_check(workspace, boxed, port[1])
    sent = json.dumps([codex.inputs(i) for i in range(len(codex.model_requests))])
    assert any(no in sent for no in REFUSED_WRITE)
    assert leaks(state_of(workspace), sent, said) == []


# -- Gemini CLI --------------------------------------------------------------------------------
@pytest.fixture
def gemini(
    workspace: Path, boxed: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeGeminiAPI]:
    """The scripted Gemini API, the CLI's settings in the home (an API key, folder trust on),
    and the unattended `yolo` mode."""
    path = real_cli("gemini")
    one_mode_workspace(workspace, "gemini", model="gemini-2.5-pro", permissionMode="yolo")
    server = FakeGeminiAPI().start()
    (boxed["home"] / ".gemini").mkdir()
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": True}}
    }
    (boxed["home"] / ".gemini" / "settings.json").write_text(json.dumps(settings))
    monkeypatch.setenv("GEMINI_CLI_HOME", str(boxed["home"]))
    monkeypatch.setenv("GEMINI_API_KEY", "test-gemini-key")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.base)
    monkeypatch.setenv("WORKER_GEMINI_BIN", str(path))
    yield server
    server.close()


def test_gemini_in_the_box(
    workspace: Path, boxed: dict[str, Any], gemini: FakeGeminiAPI, port: tuple[int, list[bytes]]
) -> None:
    """Gemini CLI in `yolo`, its run_shell_command tool running the four attacks, then its
    write_file tool in the tree: the task succeeds, every attack fails, the key stays in the box."""
    commands = attack_commands(boxed["outside"], state_of(workspace), port[0])
    target = workspace / "hello.txt"
    gemini.play(
        *[gemini_fake.call("run_shell_command", {"command": shell(c)}) for c in commands.values()],
        gemini_fake.call("write_file", {"file_path": str(target), "content": "hello\n"}),
        gemini_fake.text(status_text("success", "wrote hello.txt")),
    )
    said = run_and_check(workspace, boxed, port[1])
    sent = json.dumps([gemini.contents(i) for i in range(len(gemini.model_requests))])
    assert any(no in sent for no in REFUSED_WRITE)
    assert leaks(state_of(workspace), sent, said) == []


def test_claude_in_the_box_with_its_config_in_the_home(
    workspace: Path,
    boxed: dict[str, Any],
    claude: AnthropicAPI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without CLAUDE_CONFIG_DIR the CLI keeps `~/.claude/` and `~/.claude.json`: it still
    starts, works in its tree and finishes in the box."""
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    claude.script(
        tool_use("Write", {"file_path": str(workspace / "hello.txt"), "content": "hello\n"}),
        text("Done.\n" + status_block("success", "wrote hello.txt")),
    )
    write_message(workspace, "msg-1")
    settings = load_settings(workspace)
    report = run_once(settings, RunOptions())
    assert report.outcome.value == "success", report.reason
    assert (workspace / "hello.txt").read_text() == "hello\n"
    assert [it["sandbox"] for it in run_detail(settings, 1)["iterations"]] == ["srt"]
