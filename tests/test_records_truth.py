"""Records that tell the truth (issue 31): the secrets an agent repeats, masked at the one door
where its words enter worker, found nowhere afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worker.cli.app import app
from worker.config import load_settings

from .conftest import FakeAgent, write_message

# Values of the kind an agent may read anywhere and repeat: not token-shaped on purpose, so only
# the values themselves (from the environment) can hide them.
SECRETS = {
    "ANTHROPIC_API_KEY": "anthropic-plain-value-0123456789",
    "GITHUB_TOKEN": "github-plain-value-9876543210",
    "WORKER_GITHUB_TOKEN": "worker-gh-plain-value-5555555555",
}


def _cli(ws: Path, *args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--workspace", str(ws)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.output


def _leaks(text: str) -> list[str]:
    return [name for name, value in SECRETS.items() if value in text]


def _files_with_secrets(root: Path) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(value.encode() in data for value in SECRETS.values()):
                found.append(str(path))
    return found


def _planted(state: str, **fields: str) -> dict[str, str]:
    """An answer whose every STATUS field, and its last words, hold all three secrets."""
    words = " ".join(SECRETS.values())
    return {
        "text": f"I read {words} in a file.",
        "status": state,
        "reason": f"because {words}",
        **{key: f"{value} {words}" for key, value in fields.items()},
    }


@pytest.mark.usefixtures("only_the_task")
def test_secrets_the_agent_repeats_reach_no_file_row_or_output(
    workspace: Path, fake_claude: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in agent puts the values of ANTHROPIC_API_KEY, GITHUB_TOKEN and
    WORKER_GITHUB_TOKEN in REASON, WAIT_FOR, RESUME_WHEN and ESCALATE_TO and its last words,
    for a waiting, a failing and a succeeding task: the whole state folder, the workspace and
    the output of every command (text and JSON, `worker run --json` included) hold none."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    fake_claude.answers(
        _planted("wait", wait_for="a reviewer", resume_when="user_approval"),
        _planted("failure", escalate_to="nothing"),
        _planted("success"),
    )
    outputs = []
    for msg_id in ("asks-to-wait", "fails", "succeeds"):
        write_message(workspace, msg_id, priority="high" if msg_id == "asks-to-wait" else "normal")
    for _ in range(3):
        outputs.append(_cli(workspace, "run", "--json"))
    runs = [json.loads(out) for out in outputs]
    assert {run["outcome"] for run in runs} >= {"waiting", "success"}, runs
    assert all("because" in run["reason"] for run in runs if run["outcome"] != "failure")
    for args in (
        ("status",), ("status", "--json"), ("queue",), ("queue", "--json"), ("log",),
        ("log", "--json"), ("why",), ("why", "--json"), ("why", "1"), ("why", "1", "--json"),
        ("show",), ("show", "--json"), ("costs",), ("costs", "--json"), ("waits", "list"),
        ("waits", "list", "--json"), ("waits", "show", "asks-to-wait"),
        ("waits", "show", "asks-to-wait", "--json"), ("doctor",),
    ):  # fmt: skip
        outputs.append(_cli(workspace, *args))
    assert any("a reviewer" in out for out in outputs)  # the wait was shown, less its secrets
    leaks = [(i, _leaks(out)) for i, out in enumerate(outputs) if _leaks(out)]
    assert leaks == []
    state = load_settings(workspace).state
    assert _files_with_secrets(state) == []
    assert _files_with_secrets(workspace) == []
