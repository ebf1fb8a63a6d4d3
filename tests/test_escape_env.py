"""The agent's environment by allow-list (issue 38, point 4): a stand-in agent dumps its
environment inside the box, with bubblewrap alone and with srt; every secret worker knows of is
absent, its own API key and the system's variables are there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.escape_support import RUNTIMES, attack, box_home, outside_tmp, use_runtime

__all__ = ["box_home", "outside_tmp"]  # fixtures

# What worker knows to be secret, and one it does not know by name (its name says secret).
WORKER_KNOWS = {
    "TELEGRAM_BOT_TOKEN": "123456:telegram-bot-value",
    "PGPASSWORD": "pg-pa55word-value",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent-value/agent.1",
    "DATABASE_URL": "postgresql://app:db-pa55-value@db/app",
    "WORKER_DASHBOARD_TOKEN": "dashboard-token-value",
    "GITHUB_TOKEN": "github-token-value-xyz",
    "MY_SERVICE_TOKEN": "my-service-token-value",
}


def dumped(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_no_secret_worker_knows_of_reaches_the_agents_environment(
    runtime: str,
    workspace: Path,
    box_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Telegram's token (`token_env`), PGPASSWORD, SSH_AUTH_SOCK, a database URL, the
    dashboard's and GitHub's tokens and an unknown MY_SERVICE_TOKEN: none in the agent's
    environment (names nor values); its own API key, PATH, HOME and the locale are."""
    use_runtime(runtime, monkeypatch, tmp_path)
    for name, value in WORKER_KNOWS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "the-agents-own-key")
    monkeypatch.setenv("LANG", "C.UTF-8")
    out = attack(workspace, "env", runtime)
    env = dumped(out)
    assert env["ANTHROPIC_API_KEY"] == "the-agents-own-key"
    assert env["LANG"] == "C.UTF-8" and env["HOME"] == str(box_home) and env["PATH"]
    for name, value in WORKER_KNOWS.items():
        assert name not in env and value not in out, name


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_variable_a_setting_names_stays_out_even_when_passed(
    runtime: str,
    workspace: Path,
    box_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`token_env` names a variable that looks like nothing, and `[sandbox] pass_env` would
    let it in: it stays out (the settings name it a secret, no other list needed); another
    variable pass_env names reaches the agent."""
    (workspace / "worker.toml").write_text(
        '[notify.telegram]\ntoken_env = "CHAT_BRIDGE"\n[sandbox]\npass_env = ["CHAT_*"]\n'
    )
    monkeypatch.setenv("CHAT_BRIDGE", "bridge-token-value")
    monkeypatch.setenv("CHAT_LANGUAGE", "en")
    use_runtime(runtime, monkeypatch, tmp_path)
    out = attack(workspace, "env", runtime)
    env = dumped(out)
    assert env.get("CHAT_LANGUAGE") == "en"
    assert "CHAT_BRIDGE" not in env and "bridge-token-value" not in out


def test_the_control_unboxed_the_agent_sees_more(
    workspace: Path, box_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: with the box off the agent gets worker's children's environment, where
    only worker's own secrets are out (MY_SERVICE_TOKEN passes), so the checks above can
    fail; ssh-agent's socket and the variable `token_env` names stay out all the same."""
    for name, value in WORKER_KNOWS.items():
        monkeypatch.setenv(name, value)
    (workspace / "worker.toml").write_text('[notify.telegram]\ntoken_env = "CHAT_BRIDGE"\n')
    monkeypatch.setenv("CHAT_BRIDGE", "bridge-token-value")
    env = dumped(attack(workspace, "env", None))
    assert env["MY_SERVICE_TOKEN"] == WORKER_KNOWS["MY_SERVICE_TOKEN"]
    assert "GITHUB_TOKEN" not in env and "PGPASSWORD" not in env
    assert "SSH_AUTH_SOCK" not in env and "CHAT_BRIDGE" not in env
