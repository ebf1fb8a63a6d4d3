"""git for worker's own calls: the push credential is one-shot, bound to its host and never on
a command line; a hook the agent planted never runs on a push."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import git
from worker.gitsafe import git_argv, push_credentials
from worker.sources.github.delivery import git_host, push_branch
from worker.sources.github.settings import GitHubSettings

TOKEN = "ghs_push0token0value0000000000000000000"


def fill(config: list[str], host: str, cwd: Path) -> str:
    """What `git credential fill` gets for `host` with worker's helper (no prompt)."""
    result = subprocess.run(
        git_argv(*config, "credential", "fill"),
        input=f"protocol=https\nhost={host}\n\n",
        cwd=cwd,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": ""},
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout


def test_the_push_credential_is_one_shot_and_only_for_its_host(tmp_path: Path) -> None:
    with push_credentials(TOKEN, "github.com") as config:
        assert TOKEN not in " ".join(config)  # never on a command line
        helper = Path(config[-1].split("=", 1)[1])
        assert (helper.parent.stat().st_mode & 0o077) == 0  # a folder of this user's only
        assert f"password={TOKEN}" not in fill(config, "evil.example", tmp_path)
        assert f"password={TOKEN}" in fill(config, "github.com", tmp_path)
        assert TOKEN not in fill(config, "github.com", tmp_path)  # handed out once
    assert not helper.parent.exists()


def test_the_host_comes_from_the_api_address() -> None:
    assert git_host(GitHubSettings()) == "github.com"
    enterprise = GitHubSettings(base_url="https://git.example.com/api/v3")
    assert git_host(enterprise) == "git.example.com"


def test_a_planted_pre_push_hook_does_not_run_on_worker_push(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    origin, ws = tmp_path / "origin.git", tmp_path / "ws"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    (ws / "README.md").write_text("hello\n")
    git(ws, "add", "-A")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    git(ws, "remote", "add", "origin", str(origin))
    dump = tmp_path / "pre-push-env"
    hook = ws / ".git" / "hooks" / "pre-push"
    hook.write_text(f'#!/bin/sh\nenv > "{dump}"\n')
    hook.chmod(0o755)
    assert push_branch(GitHubSettings(), ws, "main", TOKEN) is None
    assert git(origin, "rev-parse", "main") == git(ws, "rev-parse", "main")
    assert not dump.exists()
    git(ws, "push", "-q", "origin", "main:other")  # the hook is real: plain git runs it
    assert dump.exists()
