"""`worker doctor` through the real CLI: each check's ok / warn / fail, exit 0 or 78, `--json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.conftest import git
from tests.fakes.github_server import FakeGitHub
from tests.realcli_support import real_cli
from worker.cli.app import app
from worker.config import load_settings
from worker.operator.doctor import CHECKS, Finding, Status, run_doctor


def _executable(folder: Path, name: str, output: str, code: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho '{output}'\nexit {code}\n")
    path.chmod(0o755)
    return path


def _doctor(cli: CliRunner, workspace: Path) -> tuple[int, dict[str, Any]]:
    result = cli.invoke(app, ["doctor", "--json", "-w", str(workspace)])
    return result.exit_code, json.loads(result.stdout)


def _by_check(data: dict[str, Any], check: str) -> list[tuple[str, str]]:
    return [(f["status"], f["message"]) for f in data["findings"] if f["check"] == check]


@pytest.fixture
def claude_ok(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = _executable(tmp_path / "bin", "claude", "2.1.332 (Claude Code)")
    monkeypatch.setenv("WORKER_CLAUDE_BIN", str(path))
    return path


def test_a_healthy_workspace_exits_0_and_names_the_agent_version(
    cli: CliRunner, workspace: Path, claude_ok: Path
) -> None:
    code, data = _doctor(cli, workspace)
    assert code == 0 and data["ok"] is True
    assert not [f for f in data["findings"] if f["status"] == "fail"]
    ((status, message),) = _by_check(data, "agents")
    assert status == "ok" and "Claude Code" in message and "2.1.332" in message
    assert _by_check(data, "state")[0][0] == "ok" and _by_check(data, "inbox")[0][0] == "ok"
    assert _by_check(data, "modes")[0][0] == "ok"


def test_a_missing_agent_binary_fails_with_exit_78_naming_the_setting(
    cli: CliRunner, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_CLAUDE_BIN", str(workspace / "no-such-claude"))
    result = cli.invoke(app, ["doctor", "-w", str(workspace)])
    assert result.exit_code == 78
    line = next(line for line in result.stdout.splitlines() if line.startswith("fail"))
    assert "agents" in line and "cannot be started" in line and "claude_bin" in line
    assert "no-such-claude does not exist" in line

    monkeypatch.setenv("WORKER_CLAUDE_BIN", str(workspace))  # a folder
    code, data = _doctor(cli, workspace)
    assert code == 78 and "is a folder, not a program" in _by_check(data, "agents")[0][1]


def test_an_agent_of_another_version_or_none_is_reported(
    cli: CliRunner, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version worker was not tested with warns; a CLI that prints no version fails."""
    other = _executable(tmp_path / "bin", "claude", "3.0.1 (Claude Code)")
    monkeypatch.setenv("WORKER_CLAUDE_BIN", str(other))
    code, data = _doctor(cli, workspace)
    assert code == 0 and _by_check(data, "agents")[0][0] == "warn"
    assert "tested with 2.1.x" in _by_check(data, "agents")[0][1]

    broken = _executable(tmp_path / "bin2", "claude", "Segmentation fault", code=139)
    monkeypatch.setenv("WORKER_CLAUDE_BIN", str(broken))
    code, data = _doctor(cli, workspace)
    ((status, message),) = _by_check(data, "agents")
    assert code == 78 and status == "fail" and "exit 139" in message


def test_invalid_modes_fail_and_say_which_value_was_meant(
    cli: CliRunner, workspace: Path, claude_ok: Path
) -> None:
    (workspace / "modes").mkdir()
    (workspace / "modes" / "modes.json").write_text(
        json.dumps(
            {
                "modes": [
                    {"id": "m", "model": "x", "maxIterations": 2, "permissionMode": "acceptedits"}
                ]
            }
        )
    )
    code, data = _doctor(cli, workspace)
    ((status, message),) = _by_check(data, "modes")
    assert code == 78 and status == "fail"
    assert "did you mean 'acceptEdits'" in message


def test_state_that_cannot_be_written_fails(
    cli: CliRunner, workspace: Path, claude_ok: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A state folder that is a file (permissions do not stop root, a file does)."""
    blocker = workspace / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("WORKER_STATE_DIR", str(blocker / "state"))
    code, data = _doctor(cli, workspace)
    # The settings refuse it as they load (a file where a folder must be); doctor reports that
    # under `config`, naming the key, and checks the rest on the default state folder.
    failed = [m for f in data["findings"] if f["status"] == "fail" for m in [f["message"]]]
    assert code == 78 and any("state_dir" in m and "not-a-folder" in m for m in failed), failed


def test_github_token_and_one_request_per_repository(
    cli: CliRunner,
    workspace: Path,
    claude_ok: Path,
    fake_github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Write access is ok, read only warns, an unknown repository fails; one request each."""
    fake_github.add_repo("acme/readonly", {"worker-bot": "read"})
    repos = ["acme/app", "acme/readonly", "acme/missing"]
    monkeypatch.setenv("WORKER_GITHUB__REPOS", json.dumps(repos))
    monkeypatch.setenv("WORKER_GITHUB__BASE_URL", fake_github.url)
    code, data = _doctor(cli, workspace)
    found = _by_check(data, "github")
    assert [status for status, _ in found] == ["ok", "ok", "warn", "fail"]
    assert "worker-bot" in found[0][1] and "push" in found[1][1]
    assert "read" not in found[1][1] and "pull" in found[2][1]
    assert code == 78
    paths = [entry.path for entry in fake_github.log]
    assert paths == ["/user", *(f"/repos/{repo}" for repo in repos)]


def test_a_bad_github_token_fails_and_is_never_printed(
    cli: CliRunner,
    workspace: Path,
    claude_ok: Path,
    fake_github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_wrongwrongwrongwrongwrong123")
    monkeypatch.setenv("WORKER_GITHUB__REPOS", '["acme/app"]')
    monkeypatch.setenv("WORKER_GITHUB__BASE_URL", fake_github.url)
    result = cli.invoke(app, ["doctor", "-w", str(workspace)])
    assert result.exit_code == 78
    assert "the GitHub token does not work" in result.stdout and "401" in result.stdout
    assert "ghp_wrong" not in result.stdout


def test_the_environment_is_what_the_schedule_writes_without_secrets(
    cli: CliRunner, workspace: Path, claude_ok: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/opt/node/bin:relative/bin:/usr/bin")
    monkeypatch.setenv("WORKER_GITHUB_TOKEN", "ghp_secretsecretsecretsecret0000")
    monkeypatch.setenv("WORKER_LEASE_SECONDS", "600")
    code, data = _doctor(cli, workspace)
    found = _by_check(data, "environment")
    assert found[0][0] == "ok" and "PATH=/opt/node/bin:relative/bin:/usr/bin" in found[0][1]
    assert "WORKER_LEASE_SECONDS" in found[0][1] and "WORKER_MACHINE_ID" in found[0][1]
    assert found[1][0] == "warn" and "relative/bin" in found[1][1]
    assert found[2][0] == "warn" and "WORKER_GITHUB_TOKEN" in found[2][1]
    assert "ghp_secret" not in json.dumps(data)
    assert code == 0


def _gemini_workspace(workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gemini = _executable(tmp_path / "bin", "gemini", "0.61.0")
    monkeypatch.setenv("WORKER_GEMINI_BIN", str(gemini))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ("GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI"):
        monkeypatch.delenv(name, raising=False)
    (workspace / "modes").mkdir()
    mode = {"id": "g", "model": "gemini-2.5-pro", "maxIterations": 2, "agent": "gemini"}
    (workspace / "modes" / "modes.json").write_text(json.dumps({"modes": [mode]}))


def test_gemini_without_auth_or_in_restricted_mode_fails(
    cli: CliRunner, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _gemini_workspace(workspace, tmp_path, monkeypatch)
    code, data = _doctor(cli, workspace)
    ((status, message),) = _by_check(data, "gemini")
    assert code == 78 and status == "fail" and "no auth method" in message

    # A base URL alone selects the `gateway` auth type, which a headless run refuses.
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    code, data = _doctor(cli, workspace)
    assert code == 78 and "gateway" in _by_check(data, "gemini")[0][1]

    settings = tmp_path / "home" / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{\n  // comments are allowed\n  "security": {"auth": {"selectedType": '
                        '"gemini-api-key"}}\n}')  # fmt: skip
    code, data = _doctor(cli, workspace)
    assert code == 0 and _by_check(data, "gemini")[0][0] == "ok"
    assert "--skip-trust" in _by_check(data, "gemini")[0][1]

    monkeypatch.setenv("GEMINI_RESTRICTED_MODE", "true")
    code, data = _doctor(cli, workspace)
    assert code == 78 and "GEMINI_RESTRICTED_MODE" in _by_check(data, "gemini")[0][1]


def test_a_check_that_breaks_is_a_failure_and_the_others_still_run(tmp_path: Path) -> None:
    """The registry is a list: a new check joins it; one that raises does not hide the rest."""

    def broken(context: object) -> list[Finding]:
        raise RuntimeError("boom")

    def fine(context: object) -> list[Finding]:
        return [Finding("fine", Status.OK, "all good")]

    settings = load_settings(tmp_path)
    report = run_doctor(settings, env={}, checks=[("broken", broken), ("fine", fine)])
    assert [(f.check, f.status) for f in report.findings] == [
        ("broken", Status.FAIL),
        ("fine", Status.OK),
    ]
    assert "boom" in report.findings[0].message and int(report.exit_code) == 78
    assert [name for name, _ in CHECKS][:3] == ["config", "modes", "agents"]


def test_the_real_codex_and_gemini_report_a_known_version(
    cli: CliRunner, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against the pinned CLIs (tests/realcli): `--version` is read, and it is the tested one;
    a `command` mode's program is looked up on PATH."""
    monkeypatch.setenv("WORKER_CODEX_BIN", str(real_cli("codex")))
    monkeypatch.setenv("WORKER_GEMINI_BIN", str(real_cli("gemini")))
    modes = [
        {"id": "c", "model": "gpt-5-codex", "maxIterations": 2, "agent": "codex"},
        {"id": "g", "model": "gemini-2.5-pro", "maxIterations": 2, "agent": "gemini"},
        {"id": "x", "model": "m", "maxIterations": 2, "agent": "command", "command": ["no-such"]},
    ]
    (workspace / "modes").mkdir()
    (workspace / "modes" / "modes.json").write_text(json.dumps({"modes": modes}))
    code, data = _doctor(cli, workspace)
    codex, gemini, command = _by_check(data, "agents")
    assert codex[0] == "ok" and "Codex" in codex[1] and "0.169.0" in codex[1]
    assert gemini[0] == "ok" and "Gemini CLI" in gemini[1] and "0.61.0" in gemini[1]
    assert command[0] == "fail" and "'no-such' is not found on PATH" in command[1]
    assert code == 78


def test_folders_the_agent_can_write_are_named(
    cli: CliRunner, workspace: Path, claude_ok: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An inbox or state folder inside the working tree is a warning naming its key."""
    monkeypatch.setenv("WORKER_STATE_DIR", str(workspace / "state"))
    code, data = _doctor(cli, workspace)
    found = _by_check(data, "reach")
    assert code == 0 and {status for status, _ in found} == {"warn"}
    assert any(m.startswith("state_dir") for _, m in found)
    assert any(m.startswith("inbox_dir") for _, m in found)


def test_a_damaged_database_fails_the_integrity_check(
    cli: CliRunner, workspace: Path, claude_ok: Path
) -> None:
    """`PRAGMA integrity_check` runs on the state database; a file that is not one fails."""
    settings = load_settings(workspace)
    code, data = _doctor(cli, workspace)
    assert _by_check(data, "database")[0][0] == "ok"
    settings.db_path.parent.mkdir(parents=True, exist_ok=True)
    settings.db_path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    code, data = _doctor(cli, workspace)
    ((status, message),) = _by_check(data, "database")
    assert code == 78 and status == "fail" and str(settings.db_path) in message


@pytest.mark.parametrize(
    ("toml", "warned"),
    [
        ("max_parallel = 3\n", True),  # the inbox's default: in place
        ('max_parallel = 3\ninbox_delivery = "branch"\n', False),
        ("max_parallel = 1\n", False),  # one slot: nothing waits for another
    ],
)
def test_slots_with_a_source_delivered_in_place_are_warned_of(
    cli: CliRunner, workspace: Path, claude_ok: Path, toml: str, warned: bool
) -> None:
    """`max_parallel` > 1 and a source delivered in place: doctor warns (no failure) that such
    tasks run alone, waiting for the other slots, and names the setting that changes it."""
    git(workspace, "init", "-q", "-b", "main")  # a branch delivery needs a repository
    (workspace / "worker.toml").write_text(toml)
    _, data = _doctor(cli, workspace)
    warnings = [m for status, m in _by_check(data, "delivery") if status == "warn"]
    if warned:
        (message,) = warnings
        assert "inbox's tasks are delivered in place" in message and "runs alone" in message
        assert 'inbox_delivery = "branch"' in message and "max_parallel = 3" in message
    else:
        assert warnings == []
    assert not [f for f in data["findings"] if f["check"] == "delivery" and f["status"] == "fail"]
