"""The CLI's folder per trust level (issue 38, point 6), with the real Claude Code (pinned in
tests/realcli) driven by the scripted Messages API on 127.0.0.1.

A task from a GitHub issue (untrusted) runs in the box; its Bash tool leaves a hook in the
`settings.json` and a memory in the `CLAUDE.md` of the CLI folder it was given, and tries the
operator's shared folder too. A later trusted task (an inbox message, with the box off) loads
neither: the hook's marker never lands, the memory never reaches the model, and nothing was
written into the shared folder. The control plants the same hook and memory in the shared
folder itself, and the trusted task loads both, so the checks above can fail.

Skipped, with the reason, without the CLI or a runtime that can make namespaces (in CI that
fails instead); unit tests of the copy beside them need neither.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GITHUB_REPO, git, status_block, write_message
from tests.fakes.anthropic_api import AnthropicAPI, text, tool_use
from tests.fakes.github_server import FakeGitHub, settings_for
from tests.realcli_support import one_mode_workspace, real_cli
from tests.sandbox_support import sandbox_runtime
from tests.test_sandbox import bwrap_works
from worker.config import load_settings
from worker.run.runner import RunOptions, run_once
from worker.sandbox import cli_home

MEMORY = "MEMORY-FROM-AN-ISSUE-7c1e"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    return home


@pytest.fixture
def claude(
    workspace: Path, home: Path, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> Iterator[AnthropicAPI]:
    """The real Claude Code against the scripted API, its folder ~/.claude; the workspace a
    git repository that takes GitHub's issues of acme/app and the inbox's messages."""
    path = real_cli("claude")
    one_mode_workspace(
        workspace, "claude", model="claude-sonnet-4-5", permissionMode="bypassPermissions"
    )
    git(workspace, "init", "-q", "-b", "main")
    section = settings_for(fake_github)
    lines = ["[github]"] + [f"{key} = {json.dumps(value)}" for key, value in section.items()]
    (workspace / "worker.toml").write_text("\n".join(lines) + "\n")
    api = AnthropicAPI().start()
    for name, value in api.env(str(home)).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WORKER_CLAUDE_BIN", str(path))
    monkeypatch.setenv("IS_SANDBOX", "1")  # bypassPermissions as root (CI) needs the CLI told
    yield api
    api.stop()


def box(runtime: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The defaults (`auto` for every task) with `runtime`: bubblewrap alone, or srt."""
    monkeypatch.delenv("WORKER_SANDBOX__MODE")
    monkeypatch.delenv("WORKER_SANDBOX__UNTRUSTED_MODE")
    if runtime == "bwrap":
        bwrap_works()
        monkeypatch.setenv("WORKER_SANDBOX__SRT_BIN", str(tmp_path / "no-srt"))
    else:
        monkeypatch.setenv("WORKER_SANDBOX__SRT_BIN", str(sandbox_runtime()))


def hook_settings(marker: Path) -> str:
    """A settings.json whose hooks touch `marker` at the session's start and at each prompt."""
    hook = [{"hooks": [{"type": "command", "command": f"touch {marker}"}]}]
    return json.dumps({"hooks": {"SessionStart": hook, "UserPromptSubmit": hook}})


def plant(folder: str, marker: Path) -> str:
    """The shell command that leaves the hook and the memory in `folder`."""
    settings = hook_settings(marker).replace("'", "'\\''")
    return (
        f"mkdir -p {folder}; printf '%s' '{settings}' > {folder}/settings.json; "
        f"echo {MEMORY} > {folder}/CLAUDE.md; ls -la {folder} 2>&1"
    )


def tool_results(request: dict[str, Any]) -> str:
    """The text of the tool results the request sends back to the model."""
    blocks = request["messages"][-1]["content"]
    return json.dumps([b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"])


def trusted_task(workspace: Path, api: AnthropicAPI, monkeypatch: pytest.MonkeyPatch) -> str:
    """An inbox message (trusted) run with the box off; what the CLI sent the model."""
    monkeypatch.setenv("WORKER_SANDBOX__MODE", "off")
    monkeypatch.setenv("WORKER_SANDBOX__UNTRUSTED_MODE", "off")
    monkeypatch.setenv("WORKER_GITHUB__ENABLED", "false")
    before = len(api.conversation_requests())
    api.script(text("Done.\n" + status_block("success", "looked")))
    write_message(workspace, "msg-trusted")
    report = run_once(load_settings(workspace), RunOptions())
    assert (report.source, report.outcome.value) == ("inbox", "success"), report.reason
    return json.dumps(api.conversation_requests()[before:])


@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["bwrap", "srt"])
def test_an_issues_hook_and_memory_never_reach_a_later_trusted_task(
    workspace: Path,
    home: Path,
    tmp_path: Path,
    claude: AnthropicAPI,
    fake_github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
    runtime: str,
) -> None:
    """The issue's task writes a hook and a memory into its CLI folder ($CLAUDE_CONFIG_DIR)
    and into ~/.claude; the trusted task after it, unboxed, loads neither."""
    box(runtime, tmp_path, monkeypatch)
    marker = tmp_path / "hooked"
    shared = home / ".claude"
    fake_github.add_issue(GITHUB_REPO, 7, title="Tidy", labels=("roo-schedulable",), body="x")
    claude.script(
        tool_use("Bash", {"command": plant('"$CLAUDE_CONFIG_DIR"', marker)}),
        tool_use("Bash", {"command": plant(str(shared), marker)}),
        text("Done.\n" + status_block("success", "left a hook")),
    )
    report = run_once(load_settings(workspace), RunOptions())
    assert (report.source, report.outcome.value) == ("github", "success"), report.reason
    assert not (shared / "CLAUDE.md").exists() and not (shared / "settings.json").exists()
    assert not marker.exists()
    # It wrote its own folder (its listing, the first tool's result, shows the memory), and
    # the folder went with the task's end (a success: no session to resume).
    assert "CLAUDE.md" in tool_results(claude.conversation_requests()[1])
    own = cli_home.folder_for(load_settings(workspace).state, f"{GITHUB_REPO}#7")
    assert not own.exists()

    sent = trusted_task(workspace, claude, monkeypatch)
    assert MEMORY not in sent and not marker.exists()
    assert not (shared / "CLAUDE.md").exists()


@pytest.mark.slow
def test_the_control_a_hook_and_memory_in_the_shared_folder_are_loaded(
    workspace: Path,
    home: Path,
    tmp_path: Path,
    claude: AnthropicAPI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same hook and memory planted in ~/.claude itself: the trusted task runs the hook
    and sends the memory to the model, so the test above can fail."""
    marker = tmp_path / "hooked"
    (home / ".claude" / "settings.json").write_text(hook_settings(marker))
    (home / ".claude" / "CLAUDE.md").write_text(MEMORY + "\n")
    sent = trusted_task(workspace, claude, monkeypatch)
    assert MEMORY in sent and marker.exists()


def test_the_copy_replaces_a_link_the_agent_left_and_never_writes_through_it(
    tmp_path: Path,
) -> None:
    """The task's folder is the agent's: a `settings.json` it made a link to a file of the
    operator's is replaced by the operator's settings, and the linked file is untouched."""
    shared, state = tmp_path / "operator-cli", tmp_path / "state"
    shared.mkdir()
    (shared / "settings.json").write_text('{"model": "x"}')
    (shared / ".credentials.json").write_text('{"k": 1}')
    env = {"CLAUDE_CONFIG_DIR": str(shared), "HOME": str(tmp_path)}
    own = cli_home.folder_for(state, "acme/app#7")
    variables = cli_home.prepare("claude", own, env)
    assert variables == {"CLAUDE_CONFIG_DIR": str(own / "claude")}
    victim = tmp_path / "bashrc"
    victim.write_text("operator's\n")
    (own / "claude" / "settings.json").unlink()
    (own / "claude" / "settings.json").symlink_to(victim)
    (own / "claude" / "CLAUDE.md").mkdir()  # a folder where the operator has no file
    cli_home.prepare("claude", own, env)
    assert victim.read_text() == "operator's\n"
    assert not (own / "claude" / "settings.json").is_symlink()
    assert (own / "claude" / "settings.json").read_text() == '{"model": "x"}'
    assert (own / "claude" / ".credentials.json").read_text() == '{"k": 1}'
    assert not (own / "claude" / "CLAUDE.md").exists()


@pytest.mark.parametrize(
    ("agent", "variable", "inside"),
    [
        ("claude", "CLAUDE_CONFIG_DIR", "claude"),
        ("codex", "CODEX_HOME", "codex"),
        ("gemini", "GEMINI_CLI_HOME", "gemini/.gemini"),
    ],
)
def test_each_cli_gets_a_folder_of_its_own_with_the_operators_settings(
    tmp_path: Path, agent: str, variable: str, inside: str
) -> None:
    """Claude Code, Codex and Gemini CLI: the task's folder holds the operator's credentials
    and settings, and the variable the CLI reads points at it; sessions are not copied."""
    home = tmp_path / "home"
    shared = home / {"claude": ".claude", "codex": ".codex", "gemini": ".gemini"}[agent]
    (shared / "sessions").mkdir(parents=True)
    config = {"claude": "settings.json", "codex": "config.toml", "gemini": "settings.json"}[agent]
    (shared / config).write_text("operator's settings")
    own = cli_home.folder_for(tmp_path / "state", "acme/app#9")
    variables = cli_home.prepare(agent, own, {"HOME": str(home)})
    assert variables == {variable: str(own / agent)}
    assert (own / inside / config).read_text() == "operator's settings"
    assert not (own / inside / "sessions").exists()
