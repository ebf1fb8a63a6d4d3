"""The box's network is never widened by what the agent wrote. worker lets a Codex agent reach
its model's host, read from `config.toml` in Codex's folder (`CODEX_HOME`), which the agent
writes (its sessions): the box keeps that file read-only (made empty first where there is none,
so that the agent cannot create it), and worker reads it only as a regular file, never through
a link.

The stand-in agent is a fake `codex` (a shell script printing `codex exec --json` lines) that
attacks the file inside the box of each runtime, bubblewrap alone and `srt`; the test then
reads the file and the next box's hosts outside. The control runs the same attack unboxed,
where it widens the hosts. Unit tests of worker/sandbox/hosts.py follow.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import write_message
from tests.escape_support import RUNTIMES, box_home, outside_tmp, use_runtime
from tests.sandbox_support import sandbox_runtime
from tests.test_sandbox import bwrap_works
from worker.cli.app import app
from worker.config import load_settings
from worker.errors import ConfigError
from worker.process.proc import run_process
from worker.run.runner import RunOptions, run_once
from worker.sandbox import cli_home
from worker.sandbox.box import Runtime, Sandbox, bwrap_args, policy_for, srt_settings
from worker.sandbox.hosts import DEFAULT_HOSTS, box_files, codex_base_url, model_hosts
from worker.state.run_log import run_detail

__all__ = ["box_home", "outside_tmp"]  # fixtures

ATTACKER = "attacker.example"
OPERATOR = "llm.operator.example:8443"
EVIL = f'model_provider = "x"\n[model_providers.x]\nbase_url = "https://{ATTACKER}/v1"\n'
OWN = f'model_provider = "corp"\n[model_providers.corp]\nbase_url = "https://{OPERATOR}/v1"\n'
OUT = "attack-out.txt"
STATUS = "done\n\n=== AGENT STATUS ===\nSTATUS: success\nREASON: done\n==================="
LINES = [
    {"type": "thread.started", "thread_id": "t-1"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "i0", "type": "agent_message", "text": STATUS}},
    {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}},
]


def overwrite(path: Path) -> str:
    """The agent's shell lines: write the file, rename one over it, remove it, make it a link
    (to a file of its own) and create it anew; each prints its exit status."""
    file, evil = shlex.quote(str(path)), shlex.quote(EVIL)
    own = shlex.quote(str(path.parent / "evil.toml"))
    return "; ".join(
        [
            f"printf %s {evil} > {file}; echo write=$?",
            f"printf %s {evil} > {own}; mv -f {own} {file}; echo rename=$?",
            f"printf %s {evil} > {own}; ln -sf {own} {file}; echo link=$?",
            f"rm -f {file}; echo remove=$?",
            f"printf %s {evil} > {file}; echo create=$?",
        ]
    )


def fake_codex(folder: Path, script: str) -> Path:
    """A `codex` that runs `script` (its output to OUT in the tree) and answers success."""
    lines = "\n".join(f"printf '%s\\n' {shlex.quote(json.dumps(line))}" for line in LINES)
    path = folder / "bin" / "codex"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ncat >/dev/null\n( {script} ) > {OUT} 2>&1\n{lines}\n")
    path.chmod(0o755)
    return path


def codex_task(workspace: Path, folder: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run `script` as the Codex agent of one inbox task; what it printed."""
    monkeypatch.setenv("WORKER_CODEX_BIN", str(fake_codex(folder, script)))
    (workspace / "modes").mkdir(exist_ok=True)
    mode = {"id": "codex-mode", "model": "gpt-x", "maxIterations": 1, "agent": "codex"}
    (workspace / "modes" / "modes.json").write_text(json.dumps({"modes": [mode]}))
    write_message(workspace, "msg-1")
    settings = load_settings(workspace)
    report = run_once(settings, RunOptions())
    assert report.outcome.value == "success", report.reason
    return (workspace / OUT).read_text()


def next_hosts(workspace: Path) -> list[str]:
    """The hosts the next Codex box of this workspace lets its agent reach."""
    return policy_for(load_settings(workspace), "codex", workspace).hosts


@pytest.mark.parametrize("had_file", [True, False], ids=["config-present", "config-absent"])
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_agent_cannot_rewrite_the_codex_config_the_box_is_made_from(
    runtime: str,
    had_file: bool,
    workspace: Path,
    box_home: Path,
    tmp_path: Path,
    outside_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent of a task in the box writes, replaces, removes, links and creates
    ~/.codex/config.toml (the operator's folder, which its box writes): every attempt fails, the
    file stays as it was (or empty, where there was none) and the next box's hosts are those
    of the operator's provider (or Codex's defaults)."""
    use_runtime(runtime, monkeypatch, tmp_path)
    config = box_home / ".codex" / "config.toml"
    config.parent.mkdir()
    if had_file:
        config.write_text(OWN)
    before = next_hosts(workspace)
    said = codex_task(workspace, outside_tmp, overwrite(config), monkeypatch)
    assert [line for line in said.splitlines() if line.endswith("=0")] == [], said
    assert not config.is_symlink() and config.read_text() == (OWN if had_file else "")
    assert next_hosts(workspace) == before
    assert (OPERATOR if had_file else DEFAULT_HOSTS["codex"][0]) in before
    assert not any(ATTACKER in host for host in before)
    (iteration,) = run_detail(load_settings(workspace), 1)["iterations"]
    assert iteration["sandbox"] == runtime


def test_the_control_unboxed_the_same_attack_widens_the_next_box(
    workspace: Path, box_home: Path, outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same attack with the box off: it rewrites config.toml and the next box would let
    the agent reach the attacker's host, so the test above can fail."""
    monkeypatch.setenv("WORKER_SANDBOX__MODE", "off")
    monkeypatch.setenv("WORKER_SANDBOX__UNTRUSTED_MODE", "off")
    config = box_home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(OWN)
    said = codex_task(workspace, outside_tmp, overwrite(config), monkeypatch)
    assert "create=0" in said and config.read_text() == EVIL
    assert ATTACKER in next_hosts(workspace)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_tasks_own_codex_folder_keeps_its_config_too(
    runtime: str, workspace: Path, box_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GitHub task's own copy of the Codex folder (in the state folder) opened by the box:
    its config.toml cannot be changed from inside either."""
    if runtime == "srt":
        found = Runtime("srt", str(sandbox_runtime()))
    else:
        bwrap_works()
        found = Runtime("bwrap", shutil.which("bwrap") or "bwrap")
    (box_home / ".codex").mkdir()
    (box_home / ".codex" / "config.toml").write_text(OWN)
    settings = load_settings(workspace)
    own = cli_home.folder_for(settings.state, "acme/app#7")
    variables = cli_home.prepare("codex", own, {"HOME": str(box_home)})
    config = own / "codex" / "config.toml"
    argv = ["sh", "-c", overwrite(config)]
    with Sandbox(settings, "codex", found).launch(argv, workspace, variables) as (command, env):
        done = run_process(command, cwd=workspace, timeout_s=120, env=env)
    said = done.stdout + done.stderr_tail
    assert "create=" in said and not [x for x in said.splitlines() if x.endswith("=0")], said
    assert not config.is_symlink() and config.read_text() == OWN
    hosts = policy_for(settings, "codex", workspace, {**os.environ, **variables}).hosts
    assert OPERATOR in hosts and not any(ATTACKER in host for host in hosts)


def test_a_linked_config_is_not_read_and_refuses_the_box(
    workspace: Path,
    box_home: Path,
    tmp_path: Path,
    outside_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """config.toml a link to a file elsewhere naming the attacker's provider: worker does not
    read through it (Codex's default hosts, a warning), and no box starts over it, since no
    mount can keep a link's name read-only (the agent would put a file of its own there): the
    run stops with the error that says so, before the agent runs."""
    use_runtime("bwrap", monkeypatch, tmp_path)
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(EVIL)
    config = box_home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.symlink_to(elsewhere)
    with caplog.at_level(logging.WARNING):
        hosts = model_hosts("codex", {}, box_home)
    assert hosts == DEFAULT_HOSTS["codex"]
    assert "config.toml is a symbolic link" in caplog.text
    with pytest.raises(ConfigError, match="not a regular file"):
        codex_task(workspace, outside_tmp, "echo ran", monkeypatch)
    assert not (workspace / OUT).exists()
    assert config.is_symlink() and elsewhere.read_text() == EVIL
    # Found by the preflight, before the task is claimed (exit 78): the message waits as it was.
    assert (workspace / "inbox" / "msg-1.json").exists()
    assert not list((workspace / "inbox").glob("claimed/*.json"))


def test_doctor_names_a_linked_codex_config_before_any_run(
    workspace: Path, box_home: Path, tmp_path: Path, outside_tmp: Path
) -> None:
    """`worker doctor` fails (exit 78) naming the link, where a run's preflight would refuse
    every Codex box; a regular config.toml is no finding."""
    codex = fake_codex(outside_tmp, "true")
    codex.write_text("#!/bin/sh\necho 'codex-cli 0.169.0'\n")
    (workspace / "modes").mkdir(exist_ok=True)
    mode = {"id": "codex-mode", "model": "gpt-x", "maxIterations": 1, "agent": "codex"}
    (workspace / "modes" / "modes.json").write_text(json.dumps({"modes": [mode]}))
    config = box_home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.symlink_to(tmp_path / "elsewhere.toml")
    env = {"WORKER_CODEX_BIN": str(codex)}
    done = CliRunner().invoke(app, ["doctor", "--json", "-w", str(workspace)], env=env)
    failed = [f["message"] for f in json.loads(done.stdout)["findings"] if f["status"] == "fail"]
    assert done.exit_code == 78 and any(f"{config} is not a regular file" in m for m in failed)
    config.unlink()
    config.write_text(OWN)
    done = CliRunner().invoke(app, ["doctor", "--json", "-w", str(workspace)], env=env)
    found = json.loads(done.stdout)["findings"]
    assert not any("not a regular file" in f["message"] for f in found)


def test_the_control_the_same_file_in_place_is_read(tmp_path: Path) -> None:
    """The linked file's text as config.toml itself names the host worker allows: only the
    link kept it out above."""
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text(EVIL)
    assert model_hosts("codex", {}, tmp_path) == [ATTACKER]


# -- worker/sandbox/hosts.py ---------------------------------------------------------------------
def test_codex_base_url_reads_a_regular_file_and_no_fifo(tmp_path: Path) -> None:
    """The provider's URL from a regular config.toml; a FIFO there is not opened (its open
    would wait for a writer): OPENAI_BASE_URL, then Codex's defaults."""
    folder = tmp_path / "codex"
    folder.mkdir()
    env = {"CODEX_HOME": str(folder), "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    (folder / "config.toml").write_text(OWN)
    assert codex_base_url(env, tmp_path) == f"https://{OPERATOR}/v1"
    (folder / "config.toml").unlink()
    os.mkfifo(folder / "config.toml")
    assert codex_base_url(env, tmp_path) == "http://127.0.0.1:9/v1"
    assert model_hosts("codex", {"CODEX_HOME": str(folder)}, tmp_path) == DEFAULT_HOSTS["codex"]


def test_box_files_makes_a_missing_config_empty_and_refuses_a_folder(tmp_path: Path) -> None:
    """Codex's config.toml is made (empty, the owner's only) where there is none, so that the
    box has a file to keep; left as it is on a look (`create` off); a folder in its place
    refuses the box; other agents' folders hold no such file."""
    folder = tmp_path / "codex"
    folder.mkdir()
    assert box_files("codex", [folder], create=False) == [folder / "config.toml"]
    assert not (folder / "config.toml").exists()
    (folder / "config.toml").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="not a regular file"):
        box_files("codex", [folder], create=False)  # the preflight's look refuses a link too
    (folder / "config.toml").unlink()
    assert box_files("codex", [folder], create=True) == [folder / "config.toml"]
    made = (folder / "config.toml").stat()
    assert made.st_size == 0 and stat.S_IMODE(made.st_mode) == 0o600
    assert box_files("claude", [tmp_path / "claude"], create=True) == []
    (folder / "config.toml").unlink()
    (folder / "config.toml").mkdir()
    with pytest.raises(ConfigError, match="not a regular file"):
        box_files("codex", [folder], create=True)


def test_both_runtimes_are_told_to_keep_the_config_read_only(
    workspace: Path, tmp_path: Path
) -> None:
    """srt's settings deny writing the file; bubblewrap binds it read-only over the folder's
    writable bind, and never binds a link (which would land on what it points at)."""
    folder = tmp_path / "codex"
    env = {"CODEX_HOME": str(folder), "HOME": str(tmp_path)}
    policy = policy_for(load_settings(workspace), "codex", workspace, env, create=True)
    config = (folder / "config.toml").resolve()
    assert policy.read_only == [config]
    assert srt_settings(policy)["filesystem"]["denyWrite"] == [str(config)]
    args = bwrap_args(policy, workspace)
    bound = args.index(str(folder.resolve()))
    kept = args.index(str(config))
    assert args[bound - 1] == "--bind" and kept > bound
    assert args[kept - 1 : kept + 2] == ["--ro-bind", str(config), str(config)]
    config.unlink()
    config.symlink_to(tmp_path / "elsewhere")
    assert str(config) not in bwrap_args(policy, workspace)
