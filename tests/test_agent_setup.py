"""What a mode and a schedule hand to an agent CLI: permissionMode checked per agent and turned
into the CLI's own flags; PATH and WORKER_* carried into cron, systemd and Task Scheduler."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worker.cli.app import app
from worker.errors import ConfigError
from worker.modes import PERMISSION_MODES, Mode, permission_args, validate_modes


def _mode(agent: str, permission: str | None = None, extra: list[str] | None = None) -> Mode:
    data = {"id": "m", "model": "x", "maxIterations": 2, "agent": agent}
    if permission is not None:
        data["permissionMode"] = permission
    if extra is not None:
        data["extraArgs"] = extra
    if agent == "command":
        data["command"] = ["my-agent"]
    return Mode.model_validate(data)


@pytest.mark.parametrize(
    ("agent", "value"),
    [
        ("claude", "acceptedits"),  # the case matters to the CLI
        ("claude", "workspace-write"),
        ("gemini", "bypassPermissions"),
        ("codex", "yolo"),
        ("command", "acceptEdits"),
    ],
)
def test_a_permission_mode_the_agent_refuses_is_a_config_error(agent: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_modes([_mode(agent, value)], "modes.json")
    message = str(caught.value)
    assert f"permissionMode {value!r}" in message
    if agent != "command":
        assert ", ".join(PERMISSION_MODES[agent]) in message
    if value == "acceptedits":
        assert "did you mean 'acceptEdits'" in message


def test_every_listed_value_is_accepted_for_its_agent() -> None:
    for agent, values in PERMISSION_MODES.items():
        for value in values:
            validate_modes([_mode(agent, value)], "modes.json")


def test_codex_gets_a_sandbox_that_can_edit_and_an_approval_policy_that_never_asks() -> None:
    never = ("--config", 'approval_policy="never"')
    assert permission_args(_mode("codex")) == ("--sandbox", "workspace-write", *never)
    assert permission_args(_mode("codex", "read-only")) == ("--sandbox", "read-only", *never)
    # A sandbox given in extraArgs is the mode's own choice: not given twice.
    own = permission_args(_mode("codex", extra=["-s", "danger-full-access"]))
    assert own == (*never, "-s", "danger-full-access")
    assert permission_args(_mode("gemini", "yolo")) == ("--approval-mode", "yolo")
    assert permission_args(_mode("claude", "plan")) == ("--permission-mode", "plan")
    assert permission_args(_mode("claude")) == ()


def test_modes_validate_lists_the_allowed_values_per_agent(cli: CliRunner, tmp_path: Path) -> None:
    result = cli.invoke(app, ["modes", "validate", "-w", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["permission_modes"]["codex"] == [
        "read-only",
        "workspace-write",
        "danger-full-access",
    ]
    assert "bypassPermissions" in data["permission_modes"]["claude"]
    text = cli.invoke(app, ["modes", "validate", "-w", str(tmp_path)]).stdout
    assert "gemini: default, auto_edit, yolo, plan" in text

    bad = tmp_path / "bad.json"
    mode = {"id": "g", "model": "m", "maxIterations": 1, "agent": "gemini"}
    bad.write_text(json.dumps({"modes": [{**mode, "permissionMode": "bypassPermissions"}]}))
    failed = cli.invoke(app, ["modes", "validate", "-w", str(tmp_path), str(bad)])
    # main() turns the ConfigError into its message on stderr and exit 78.
    assert isinstance(failed.exception, ConfigError) and failed.exception.exit_code == 78
    assert "allowed: default, auto_edit, yolo, plan" in str(failed.exception)


@pytest.fixture
def user_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/home/u/.npm-global/bin:/usr/bin:/bin")
    monkeypatch.setenv("WORKER_LEASE_SECONDS", "600")
    monkeypatch.setenv("WORKER_GITHUB_TOKEN", "ghp_secretsecretsecretsecret0000")
    url = "postgresql://worker:secretsecretpw@db.example.net/worker"
    monkeypatch.setenv("WORKER_FLEET__DATABASE_URL", url)


def _files(cli: CliRunner, kind: str, workspace: Path) -> dict[str, str]:
    result = cli.invoke(app, ["schedule", kind, "--json", "-w", str(workspace)])
    assert result.exit_code == 0, result.output
    files: dict[str, str] = json.loads(result.stdout)["files"]
    assert not any("secretsecret" in text for text in files.values())
    main = next(text for name, text in files.items() if not name.endswith(".timer"))
    assert "Left out as secrets" in main and "WORKER_GITHUB_TOKEN" in main
    assert "WORKER_FLEET__DATABASE_URL" in main
    return files


def test_crontab_carries_path_and_worker_variables_but_no_secret(
    cli: CliRunner, workspace: Path, user_env: None
) -> None:
    (crontab,) = _files(cli, "cron", workspace).values()
    (job,) = [line for line in crontab.splitlines() if not line.startswith("#")]
    assert "PATH=/home/u/.npm-global/bin:/usr/bin:/bin WORKER_" in job
    assert " WORKER_LEASE_SECONDS=600 " in job
    assert job.index("WORKER_LEASE_SECONDS=600") < job.index("-m worker run")


def test_systemd_unit_sets_the_variables(cli: CliRunner, workspace: Path, user_env: None) -> None:
    files = _files(cli, "systemd", workspace)
    service = files[f"worker-run-{workspace.name}.service"]
    assert 'Environment="PATH=/home/u/.npm-global/bin:/usr/bin:/bin"' in service
    assert 'Environment="WORKER_LEASE_SECONDS=600"' in service


def test_task_scheduler_sets_the_variables_before_the_run(
    cli: CliRunner, workspace: Path, user_env: None
) -> None:
    (xml,) = _files(cli, "windows", workspace).values()
    ns = {"t": "http://schemas.microsoft.com/windows/2004/02/mit/task"}
    root = ET.fromstring(xml)
    assert root.findtext(".//t:Command", namespaces=ns) == "cmd.exe"
    args = root.findtext(".//t:Arguments", namespaces=ns) or ""
    assert args.startswith('/d /c set "PATH=/home/u/.npm-global/bin:/usr/bin:/bin"&& ')
    assert 'set "WORKER_LEASE_SECONDS=600"&& ' in args and args.endswith(f"{workspace}")
