"""Secrets the agent repeats, with the real Claude Code (the pinned CLI, talking only to the
scripted Messages API on 127.0.0.1): its STATUS fields and last words hold the values of
ANTHROPIC_API_KEY, GITHUB_TOKEN and WORKER_GITHUB_TOKEN, and none reaches the state folder,
the workspace or any command's output (tests/test_records_truth.py does the same with the
stand-in agent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.anthropic_api import AnthropicAPI, text
from tests.realcli_support import real_cli, status_text

from .conftest import run_with_real_claude, state_of, write_message

real_cli("claude", module=True)

pytestmark = pytest.mark.slow

SECRETS = {
    "ANTHROPIC_API_KEY": "anthropic-real-cli-value-24680",
    "GITHUB_TOKEN": "github-real-cli-value-13579",
    "WORKER_GITHUB_TOKEN": "worker-real-cli-value-11223",
}


def _found_in(root: Path) -> list[str]:
    return [
        str(path)
        for path in root.rglob("*")
        if path.is_file()
        and not path.is_symlink()
        and any(value.encode() in path.read_bytes() for value in SECRETS.values())
    ]


def test_secrets_the_real_agent_repeats_reach_no_file_or_output(
    workspace: Path, claude_api: AnthropicAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    words = " ".join(SECRETS.values())
    claude_api.script(
        text(
            status_text(
                "wait", f"because {words}", text=f"I read {words}.",
                wait_for=f"a reviewer {words}", resume_when="user_approval",
            )
        )
    )  # fmt: skip
    write_message(workspace, "real-wait")
    env = dict(SECRETS)
    outputs = []
    done = run_with_real_claude(workspace, claude_api, "run", "--json", env=env)
    assert json.loads(done.stdout)["outcome"] == "waiting", done.stderr
    outputs.append(done.stdout + done.stderr)
    for args in (
        ("status", "--json"), ("waits", "list", "--json"), ("waits", "show", "real-wait"),
        ("queue", "--json"), ("log", "--json"), ("why", "--json"), ("show",),
    ):  # fmt: skip
        done = run_with_real_claude(workspace, claude_api, *args, env=env)
        outputs.append(done.stdout + done.stderr)
    assert any("a reviewer" in out for out in outputs)
    assert [i for i, out in enumerate(outputs) if any(v in out for v in SECRETS.values())] == []
    assert _found_in(state_of(workspace)) == []
    assert _found_in(workspace) == []
