"""The user-wide config.toml (the platform's config folder) and `--config FILE`: precedence
command line > environment > workspace file > user file > defaults, and `worker doctor`
naming where each value came from."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import FakeAgent, run_worker, state_of, write_message
from worker.config import load_settings
from worker.config_load import user_config_path
from worker.errors import ConfigError


@pytest.fixture
def user_file(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user-wide config.toml of this test's user (XDG_CONFIG_HOME is the test's own);
    no WORKER_MACHINE_ID, which would win over it."""
    monkeypatch.delenv("WORKER_MACHINE_ID")
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "worker" / "config.toml"
    path.parent.mkdir(parents=True)
    return path


def doctor_config(ws: Path, *args: str, env: dict[str, str] | None = None) -> list[str]:
    done = run_worker(ws, "doctor", "--json", *args, env=env)
    findings = json.loads(done.stdout)["findings"]
    return [f["message"] for f in findings if f["check"] == "config"]


def test_a_user_wide_config_sets_the_machine_id(workspace: Path, user_file: Path) -> None:
    """`machine_id` in the user-wide config.toml is this machine's name in every workspace:
    `worker status` reports it, as the loaded settings hold it."""
    user_file.write_text('machine_id = "desk-7"\n', encoding="utf-8")
    status = json.loads(run_worker(workspace, "status", "--json").stdout)
    assert status["machine_id"] == "desk-7"
    assert load_settings(workspace).machine_id == "desk-7"


def test_each_layer_wins_over_the_one_below_and_doctor_names_the_origin(
    workspace: Path, user_file: Path
) -> None:
    """The user file gives machine_id and the interval; worker.toml gives another machine_id;
    a variable another interval: doctor shows the workspace file's machine_id and the
    variable's interval, each with where it came from, and the order the files were read."""
    user_file.write_text('machine_id = "desk-7"\n[daemon]\ninterval_s = 600\n', "utf-8")
    (workspace / "worker.toml").write_text('machine_id = "ws-box"\n', encoding="utf-8")
    lines = doctor_config(workspace, env={"WORKER_DAEMON__INTERVAL_S": "900"})
    assert f"machine_id = ws-box (from {workspace / 'worker.toml'})" in lines
    assert "daemon.interval_s = 900.0 (from WORKER_DAEMON__INTERVAL_S)" in lines
    order = next(line for line in lines if line.startswith("read in this order"))
    assert order.index(str(user_file)) < order.index(str(workspace / "worker.toml"))
    assert order.index("worker.toml") < order.index("WORKER_*") < order.index("command line")
    (workspace / "worker.toml").unlink()
    lines = doctor_config(workspace)
    assert f"machine_id = desk-7 (from {user_file})" in lines
    assert f"daemon.interval_s = 600.0 (from {user_file})" in lines
    assert f"user file {user_file} <" in order


def test_config_option_replaces_the_user_file_before_or_after_the_command(
    workspace: Path, user_file: Path, tmp_path: Path
) -> None:
    """`--config FILE` is read in place of the user-wide file, wherever it stands on the
    line; a missing one stops `worker run` (exit 78) and is a warning in `status`."""
    user_file.write_text('machine_id = "desk-7"\n', encoding="utf-8")
    other = tmp_path / "ci.toml"
    other.write_text('machine_id = "ci-runner"\n', encoding="utf-8")
    after = json.loads(run_worker(workspace, "status", "--json", "--config", str(other)).stdout)
    before = json.loads(run_worker(workspace, f"--config={other}", "status", "--json").stdout)
    assert after["machine_id"] == before["machine_id"] == "ci-runner"
    lines = doctor_config(workspace, "--config", str(other))
    assert f"machine_id = ci-runner (from {other})" in lines
    missing = run_worker(workspace, "run", "--config", str(tmp_path / "nope.toml"))
    assert missing.returncode == 78 and "nope.toml: no such file" in missing.stderr


def test_a_mistake_in_the_user_file_names_that_file_and_the_fix(
    workspace: Path, user_file: Path
) -> None:
    """An unknown key in the user-wide file is refused like one in worker.toml, naming the
    user file (not worker.toml) and the closest setting."""
    user_file.write_text('machine_idd = "desk-7"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_settings(workspace)
    assert str(user_file) in str(refused.value) and "machine_id" in str(refused.value)


def test_the_user_config_folder_is_the_platforms_own() -> None:
    """XDG_CONFIG_HOME (a relative one ignored, as the specification says), else ~/.config;
    ~/Library/Application Support on macOS; %APPDATA% on Windows."""
    home = {"HOME": "/home/u"}
    assert user_config_path({**home, "XDG_CONFIG_HOME": "/cfg"}, "linux") == Path(
        "/cfg/worker/config.toml"
    )
    assert user_config_path({**home, "XDG_CONFIG_HOME": "rel"}, "linux") == Path(
        "/home/u/.config/worker/config.toml"
    )
    assert user_config_path(home, "darwin") == Path(
        "/home/u/Library/Application Support/worker/config.toml"
    )
    assert user_config_path({**home, "APPDATA": "C:/Users/u/AppData/Roaming"}, "win32") == Path(
        "C:/Users/u/AppData/Roaming/worker/config.toml"
    )


def test_an_agent_that_rewrites_the_user_config_has_it_put_back(
    workspace: Path, user_file: Path, fake_claude: FakeAgent
) -> None:
    """The user-wide file is worker's configuration too: an agent (unboxed here) that writes
    into it during its task finds it restored after the task (WORKER_CONFIG_RESTORED), its
    version kept beside the run's logs."""
    user_file.write_text('machine_id = "desk-7"\n', encoding="utf-8")
    fake_claude.answers(
        {
            "status": "success",
            "reason": "done",
            "files": [{"path": str(user_file), "text": "task_cost_cap_usd = 500.0\n"}],
        }
    )
    write_message(workspace, "msg-1", to="desk-7")
    done = json.loads(run_worker(workspace, "run", "--json").stdout)
    assert "WORKER_CONFIG_RESTORED" in done["reason_codes"]
    assert user_file.read_text(encoding="utf-8") == 'machine_id = "desk-7"\n'
    kept = state_of(workspace) / "logs" / f"run-{done['run_id']}" / "agent-config.toml"
    assert "500.0" in kept.read_text(encoding="utf-8")
