"""The agent's sandbox without the real agent CLIs: bubblewrap as the Linux fallback around a
`command` agent, `required` without a runtime (exit 78, nothing claimed), `auto` without one
(a warning, unboxed), the dry run's wrapped command, `worker doctor`'s report, and where the
model's API host is read from."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.fakes.github_server import settings_for
from tests.sandbox_support import SECRET, leaks, plant_secret
from worker.agents.codex import CodexAdapter
from worker.agents.sandboxed import SandboxedAdapter, without_codex_sandbox
from worker.cli.app import app
from worker.config import load_settings
from worker.errors import ConfigError
from worker.results import AgentRequest
from worker.run.runner import RunOptions, run_once
from worker.sandbox.box import Runtime, Sandbox, for_task
from worker.sandbox.hosts import host_entry, model_hosts, no_proxy_without
from worker.sandbox.report import describe
from worker.state.run_log import run_detail

from .conftest import git, run_worker, state_of, write_message

# Written by the boxed agent in a read-only system folder: refused (EROFS) in the box.
PROBE = Path("/etc/worker-box-probe")
STATUS = "printf '=== AGENT STATUS ===\\nSTATUS: success\\nREASON: done\\n===================\\n'"


def bwrap_works() -> None:
    """Skip (fail in CI: `CI` or `SANDBOX_REQUIRED`) where bubblewrap cannot make namespaces."""
    problem = None
    if shutil.which("bwrap") is None:
        problem = "bubblewrap is not installed: `apt-get install bubblewrap`"
    else:
        argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            problem = f"bubblewrap cannot make namespaces here: {done.stderr.strip()}"
    if problem and (os.environ.get("CI") or os.environ.get("SANDBOX_REQUIRED")):
        pytest.fail(problem)
    if problem:
        pytest.skip(problem)


def command_mode(workspace: Path, script: str) -> None:
    (workspace / "modes").mkdir(exist_ok=True)
    mode = {
        "id": "plain",
        "model": "local",
        "maxIterations": 1,
        "agent": "command",
        "command": ["sh", "-c", script],
    }
    (workspace / "modes" / "modes.json").write_text(json.dumps({"modes": [mode]}))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    plant_secret(home)
    return home


def test_bubblewrap_keeps_the_agent_in_its_tree(
    workspace: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No sandbox runtime, bubblewrap installed, the default settings: the agent writes its
    tree and its private tmp, and cannot read ~/.ssh, write beside the tree, nor write or read
    worker's state folder."""
    bwrap_works()
    monkeypatch.delenv("WORKER_SANDBOX__MODE")  # the defaults, not the suite's
    monkeypatch.delenv("WORKER_SANDBOX__UNTRUSTED_MODE")
    monkeypatch.setenv("WORKER_SANDBOX__SRT_BIN", str(tmp_path / "no-srt"))
    outside = tmp_path / "outside"
    outside.mkdir()
    state = state_of(workspace)
    state.mkdir(parents=True)
    (state / "peek.txt").write_text("state-private\n")
    command_mode(
        workspace,
        f"exec 2>&1; cat ~/.ssh/id_ed25519; echo pwned > {outside}/escape.txt; "
        f"echo pwned > {state}/pwned.txt; cat {state}/peek.txt; echo hello > hello.txt; "
        f"echo pwned > {PROBE}; "
        'touch "$TMPDIR/scratch" && echo "tmp ok"; ' + STATUS,
    )
    write_message(workspace, "msg-1")
    settings = load_settings(workspace)
    report = run_once(settings, RunOptions())
    assert report.outcome.value == "success", report.reason
    assert (workspace / "hello.txt").read_text() == "hello\n"
    assert not (outside / "escape.txt").exists() and not (state / "pwned.txt").exists()
    log = next((state / "logs").rglob("iteration-1.jsonl")).read_text()
    assert "tmp ok" in log and "Read-only file system" in log
    assert "state-private" not in log
    assert leaks(state, log) == []
    (iteration,) = run_detail(settings, 1)["iterations"]
    assert iteration["sandbox"] == "bwrap"
    # The test's folders are under /tmp, which is empty in the box (no such file): the
    # refusal recorded is the write to the read-only system.
    assert not PROBE.exists()
    assert any(str(PROBE) in line for line in iteration["sandbox_refused"])
    shown = CliRunner().invoke(app, ["show", "1", "-w", str(workspace)])
    assert "sandboxed (bwrap)" in shown.stdout and "sandbox refused: " in shown.stdout


def test_the_same_agent_unboxed_does_all_of_it(workspace: Path, home: Path, tmp_path: Path) -> None:
    """The control: with `mode = "off"` (the suite's setting) the same commands work."""
    outside = tmp_path / "outside"
    outside.mkdir()
    state = state_of(workspace)
    command_mode(
        workspace,
        f"cat ~/.ssh/id_ed25519; echo pwned > {outside}/escape.txt; "
        f"echo pwned > {state}/pwned.txt; " + STATUS,
    )
    write_message(workspace, "msg-1")
    settings = load_settings(workspace)
    assert run_once(settings, RunOptions()).outcome.value == "success"
    assert (outside / "escape.txt").exists() and (state / "pwned.txt").exists()
    log = next((state / "logs").rglob("iteration-1.jsonl")).read_text()
    assert SECRET in log
    assert [it["sandbox"] for it in run_detail(settings, 1)["iterations"]] == [None]
    shown = CliRunner().invoke(app, ["show", "1", "-w", str(workspace)])
    assert "not sandboxed" in shown.stdout


@pytest.mark.parametrize("bwrap", ["missing", "installed"])
def test_required_without_a_runtime_refuses_before_any_claim(
    workspace: Path, home: Path, tmp_path: Path, bwrap: str
) -> None:
    """`required` with no runtime (or bubblewrap alone, which cannot limit the network): exit
    78, the message names what to install, the task is neither claimed nor run."""
    if bwrap == "installed" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    command_mode(workspace, "echo ran > ran.txt; " + STATUS)
    write_message(workspace, "msg-1")
    env = {
        "WORKER_SANDBOX__MODE": "required",
        "WORKER_SANDBOX__SRT_BIN": str(tmp_path / "no-srt"),
        "WORKER_SANDBOX__BWRAP_BIN": "bwrap" if bwrap == "installed" else str(tmp_path / "no"),
    }
    done = run_worker(workspace, "run", env=env)
    assert done.returncode == 78, done.stderr
    assert "npm install -g @anthropic-ai/sandbox-runtime" in done.stderr
    assert (
        "the sandbox is required (sandbox.mode" in done.stderr
        and "No task was taken" in done.stderr
    )
    assert not (workspace / "ran.txt").exists()
    message = json.loads((workspace / "inbox" / "msg-1.json").read_text())
    assert message["status"] == "unread"
    db = sqlite3.connect(state_of(workspace) / "worker.db")
    assert db.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
    assert db.execute("SELECT COUNT(*) FROM iterations").fetchone()[0] == 0


def test_auto_without_a_runtime_warns_and_runs_unboxed(
    workspace: Path, home: Path, tmp_path: Path
) -> None:
    command_mode(workspace, "echo ran > ran.txt; " + STATUS)
    write_message(workspace, "msg-1")
    env = {
        "WORKER_SANDBOX__MODE": "auto",
        "WORKER_SANDBOX__SRT_BIN": str(tmp_path / "no-srt"),
        "WORKER_SANDBOX__BWRAP_BIN": str(tmp_path / "no-bwrap"),
    }
    done = run_worker(workspace, "run", env=env)
    assert done.returncode == 0, done.stderr
    assert "the agent runs without a sandbox" in done.stderr
    assert (workspace / "ran.txt").exists()


def test_a_dry_run_shows_the_wrapped_command_and_makes_nothing(
    workspace: Path, home: Path, tmp_path: Path
) -> None:
    """bubblewrap's mounts before the agent's own command; the CLI's session folder (absent)
    is not made by looking."""
    bwrap_works()
    command_mode(workspace, STATUS)
    write_message(workspace, "msg-1")
    env = {"WORKER_SANDBOX__MODE": "auto", "WORKER_SANDBOX__SRT_BIN": str(tmp_path / "no")}
    done = run_worker(workspace, "run", "--dry-run", "--json", env=env)
    assert done.returncode == 0, done.stderr
    command = json.loads(done.stdout)["command"]
    assert command[0].endswith("bwrap") and command[-3:] == ["sh", "-c", STATUS]
    # /tmp first (emptied in the box: private), then ~/.ssh hidden
    tmpfs = [command[i + 1] for i, arg in enumerate(command) if arg == "--tmpfs"]
    assert tmpfs[0] == "/tmp" and str(home / ".ssh") in tmpfs
    assert ["--bind", str(workspace), str(workspace)] == command[
        command.index("--bind") : command.index("--bind") + 3
    ]
    assert not state_of(workspace).exists()


def test_doctor_names_the_runtime_and_what_it_enforces(
    workspace: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_SANDBOX__MODE", "required")
    monkeypatch.setenv("WORKER_SANDBOX__SRT_BIN", str(tmp_path / "no-srt"))
    monkeypatch.setenv("WORKER_SANDBOX__BWRAP_BIN", str(tmp_path / "no-bwrap"))
    done = CliRunner().invoke(app, ["doctor", "--json", "-w", str(workspace)])
    findings = [f for f in json.loads(done.stdout)["findings"] if f["check"] == "sandbox"]
    assert done.exit_code == 78
    assert findings[0]["status"] == "fail" and "no agent will start" in findings[0]["message"]
    assert any("Linux:" in f["message"] or "macOS:" in f["message"] for f in findings)


def test_doctor_with_bubblewrap_says_the_network_is_not_limited(
    workspace: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bwrap_works()
    monkeypatch.setenv("WORKER_SANDBOX__MODE", "auto")
    monkeypatch.setenv("WORKER_SANDBOX__SRT_BIN", str(tmp_path / "no-srt"))
    done = CliRunner().invoke(app, ["doctor", "--json", "-w", str(workspace)])
    findings = [f for f in json.loads(done.stdout)["findings"] if f["check"] == "sandbox"]
    first: dict[str, Any] = findings[0]
    assert first["status"] == "warn" and "network: NOT limited" in first["message"]
    assert str(home / ".ssh") in first["message"] and str(state_of(workspace)) in first["message"]


def test_the_model_host_comes_from_the_agent_configuration(tmp_path: Path) -> None:
    home = tmp_path
    assert model_hosts("claude", {}, home)[0] == "api.anthropic.com"
    assert model_hosts("claude", {"ANTHROPIC_BASE_URL": "http://127.0.0.1:8080/x"}, home) == [
        "127.0.0.1:8080"
    ]
    assert model_hosts("gemini", {"GOOGLE_GEMINI_BASE_URL": "https://g.example"}, home) == [
        "g.example"
    ]
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(
        'model_provider = "p"\n[model_providers.p]\nbase_url = "https://llm.corp:8443/v1"\n'
    )
    assert model_hosts("codex", {}, home) == ["llm.corp:8443"]
    assert model_hosts("codex", {"CODEX_HOME": str(tmp_path / "none")}, home)[0] == (
        "api.openai.com"
    )
    assert host_entry("http://[::1]:9/") == "[::1]:9"


def test_a_local_model_host_leaves_the_proxy_bypass_list() -> None:
    """Inside the box 127.0.0.1 is the box's own: a local model API must go through the
    proxy, so its address leaves NO_PROXY (the rest stays)."""
    assert no_proxy_without(["api.anthropic.com"]) is None
    kept = no_proxy_without(["127.0.0.1:8080", "github.com"])
    assert kept is not None and "127.0.0.1" not in kept.split(",") and "localhost" in kept
    assert "10.0.0.0/8" not in (no_proxy_without(["10.1.2.3:80"]) or "")


def test_codex_own_sandbox_gives_way_to_the_box(workspace: Path, tmp_path: Path) -> None:
    """Codex's own sandbox is bubblewrap, which cannot run inside the box: its mode becomes
    `danger-full-access` there, and `read-only` makes the box's working tree read-only."""

    assert without_codex_sandbox(("--sandbox", "workspace-write", "-c", "x")) == (
        ("--sandbox", "danger-full-access", "-c", "x"),
        "workspace-write",
    )
    assert without_codex_sandbox(("--sandbox=read-only",)) == (
        ("--sandbox=danger-full-access",),
        "read-only",
    )
    settings = load_settings(workspace)
    adapter = SandboxedAdapter(
        CodexAdapter("codex"), Sandbox(settings, "codex", Runtime("bwrap", "bwrap"))
    )
    request = AgentRequest(prompt="", model="m", cwd=workspace, timeout_s=1)
    writable = adapter.command(dataclasses.replace(request, extra_args=("-s", "workspace-write")))
    read_only = adapter.command(dataclasses.replace(request, extra_args=("-s", "read-only")))
    for command in (writable, read_only):
        assert command[command.index("-s") + 1] == "danger-full-access"
    tree = ["--bind", str(workspace), str(workspace)]
    assert any(writable[i : i + 3] == tree for i in range(len(writable)))
    assert not any(read_only[i : i + 3] == tree for i in range(len(read_only)))


def test_doctor_warns_when_github_tasks_would_run_unboxed(workspace: Path) -> None:
    """Tasks from GitHub issues are text by other people: with the sandbox off, doctor says
    so; without repositories it only says the sandbox is off."""

    settings = load_settings(workspace, env={"WORKER_SANDBOX__MODE": "off"})
    assert "GitHub" not in describe(settings)[0][1]
    github = {"WORKER_SANDBOX__MODE": "off", "WORKER_GITHUB__REPOS": '["o/r"]'}
    status, message = describe(load_settings(workspace, env=github))[0]
    assert status == "warn" and "GitHub issues" in message


def test_a_github_task_is_boxed_even_with_the_sandbox_off(workspace: Path) -> None:
    """`mode = "off"` is the operator's choice for trusted intake: a task from GitHub issues
    (text by other people) still gets `untrusted_mode` (`auto` by default), or more."""

    def box(source: str, **env: str) -> str:
        given = {f"WORKER_SANDBOX__{k.upper()}": v for k, v in env.items()}
        return for_task(load_settings(workspace, env=given), source).sandbox.mode

    assert box("inbox", mode="off") == "off"
    assert box("github", mode="off") == "auto"
    assert box("github", mode="off", untrusted_mode="required") == "required"
    assert box("github", mode="required") == "required"
    assert box("github", mode="off", untrusted_mode="off") == "off"


def test_a_github_task_without_its_box_is_never_claimed(
    tmp_path: Path, fake_github: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`untrusted_mode = "required"`, no runtime: the issue is refused before its claim (no
    label, no comment) with the words of what to install; the sandbox being off for the
    inbox does not let it through."""

    fake_github.add_issue("acme/app", 7, title="Fix it", body="x", labels=("roo-schedulable",))
    ws = tmp_path / "ws"
    ws.mkdir()
    section = settings_for(fake_github)
    lines = ["[github]"] + [f"{key} = {json.dumps(value)}" for key, value in section.items()]
    (ws / "worker.toml").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("WORKER_SANDBOX__UNTRUSTED_MODE", "required")
    monkeypatch.setenv("WORKER_SANDBOX__SRT_BIN", str(tmp_path / "no-srt"))
    monkeypatch.setenv("WORKER_SANDBOX__BWRAP_BIN", str(tmp_path / "no-bwrap"))
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    with pytest.raises(ConfigError, match="npm install -g @anthropic-ai/sandbox-runtime"):
        run_once(load_settings(ws), RunOptions())
    assert fake_github.comments_of("acme/app", 7) == []
    assert "worker:in-progress" not in fake_github.labels_of("acme/app", 7)


def test_in_a_worktree_the_agent_sees_its_own_and_not_the_others(
    workspace: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `--use-worktree` the tree lives in the state folder: the box opens that one tree
    (and its git folder: `git add` works), while the other worktrees beside it stay hidden."""
    bwrap_works()
    monkeypatch.delenv("WORKER_SANDBOX__MODE")
    monkeypatch.setenv("WORKER_SANDBOX__SRT_BIN", str(workspace / "no-srt"))
    git(workspace, "init", "-q", "-b", "main")
    (workspace / ".gitignore").write_text("inbox/\nmodes/\n")
    git(workspace, "add", "-A")
    git(workspace, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    other = state_of(workspace) / "worktrees" / "other"
    other.mkdir(parents=True)
    (other / "notes.txt").write_text("another-task-private\n")
    command_mode(
        workspace,
        f"exec 2>&1; cat {other}/notes.txt; echo hello > hello.txt; git add hello.txt "
        "&& echo added; " + STATUS,
    )
    write_message(workspace, "msg-1")
    settings = load_settings(workspace)
    report = run_once(settings, RunOptions(use_worktree=True))
    assert report.outcome.value == "success", report.reason
    log = next((settings.logs).rglob("iteration-1.jsonl")).read_text()
    assert "added" in log and "another-task-private" not in log
    assert git(workspace, "show", f"{report.branch}:hello.txt") == "hello\n"


def test_a_bubblewrap_that_cannot_make_namespaces_is_no_runtime(
    workspace: Path, home: Path, tmp_path: Path
) -> None:
    """Where bubblewrap is installed but cannot run (a container without user namespaces):
    `auto` warns with bubblewrap's words and runs the agent unboxed, doctor says why, and
    `required` refuses before any claim."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    command_mode(workspace, "echo ran > ran.txt; " + STATUS)
    write_message(workspace, "msg-1")
    env = {
        "WORKER_SANDBOX__MODE": "auto",
        "WORKER_SANDBOX__SRT_BIN": str(tmp_path / "no-srt"),
        "WORKER_SANDBOX__BWRAP_BIN": str(fake),
    }
    doctor = run_worker(workspace, "doctor", "--json", env=env)
    found = [f for f in json.loads(doctor.stdout)["findings"] if f["check"] == "sandbox"]
    assert found[0]["status"] == "warn" and "No permissions to create" in found[0]["message"]
    refused = run_worker(workspace, "run", env={**env, "WORKER_SANDBOX__MODE": "required"})
    assert refused.returncode == 78 and "npm install -g" in refused.stderr
    assert not (workspace / "ran.txt").exists()
    done = run_worker(workspace, "run", env=env)
    assert done.returncode == 0, done.stderr
    assert "the agent runs without a sandbox" in done.stderr and (workspace / "ran.txt").exists()
