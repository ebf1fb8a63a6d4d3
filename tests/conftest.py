"""Shared fixtures: an isolated workspace, a fake `claude`, and a CLI runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings

from tests.pg import pg_cluster, pg_url  # noqa: F401  (fixtures: a real PostgreSQL)

# In CI the property tests run the same examples every time: a failure there is reproducible,
# and a landing never depends on luck. Locally they explore new examples on each run.
hypothesis_settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")

FAKE_CLAUDE = Path(__file__).parent / "fakes" / "fake_claude.py"
REPO = Path(__file__).resolve().parents[1]
TRANSCRIPTS = Path(__file__).parent / "fixtures" / "transcripts"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads the developer's WORKER_* settings or tokens; output is plain."""
    for name in list(os.environ):
        if name.startswith(("WORKER_", "ANTHROPIC_", "CLAUDE_")) or name in (
            "GITHUB_TOKEN",
            "FAKE_CLAUDE_SCRIPT",
        ):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("WORKER_MACHINE_ID", "test-machine")
    # The suite's agents run unboxed; tests/test_sandbox*.py put them back in the default box.
    monkeypatch.setenv("WORKER_SANDBOX__MODE", "off")
    monkeypatch.setenv("WORKER_SANDBOX__UNTRUSTED_MODE", "off")
    # worker's state folder (database, intercom, logs, locks) lives in the user's state home:
    # in a test that is a folder of the test's own, never the developer's home; beside
    # tmp_path, not in it, since many tests use tmp_path itself as the workspace.
    state_home = tmp_path.parent / f"{tmp_path.name}-state-home"
    monkeypatch.setenv("XDG_STATE_HOME", str(state_home))
    monkeypatch.setenv("LOCALAPPDATA", str(state_home))
    # Nor the developer's user-wide config.toml: the user's config folder is the test's own.
    config_home = tmp_path.parent / f"{tmp_path.name}-config-home"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    monkeypatch.setenv("APPDATA", str(config_home))


def needs_posix(reason: str) -> pytest.MarkDecorator:
    """Marks a test that needs a POSIX system (process groups, signals, shebang scripts): on
    Windows it is skipped, with `reason`."""
    return pytest.mark.skipif(sys.platform == "win32", reason=f"needs POSIX: {reason}")


@dataclass
class FakeAgent:
    """A fake `claude` executable scripted with answers; `calls` reads what it was given."""

    path: Path
    script: Path
    log: Path

    def answers(self, *answers: dict[str, Any]) -> None:
        self.script.write_text(json.dumps({"answers": list(answers)}), encoding="utf-8")

    @property
    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]

    @property
    def task_calls(self) -> list[dict[str, Any]]:
        """Calls that worked on a task (reviewers may call the same agent between tasks)."""
        return [call for call in self.calls if call["stdin"].startswith("# Task")]

    def env(self) -> dict[str, str]:
        return {
            "WORKER_CLAUDE_BIN": str(self.path),
            "FAKE_CLAUDE_SCRIPT": str(self.script),
            "FAKE_CLAUDE_LOG": str(self.log),
        }


@pytest.fixture
def fake_claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeAgent:
    """A `claude` on disk (a wrapper script calling tests/fakes/fake_claude.py)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if sys.platform == "win32":  # Windows runs no shebang script: a batch file instead
        wrapper = bin_dir / "claude.cmd"
        wrapper.write_text(f'@"{sys.executable}" "{FAKE_CLAUDE}" %*\r\n')
    else:
        wrapper = bin_dir / "claude"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_CLAUDE}" "$@"\n')
        wrapper.chmod(0o755)
    agent = FakeAgent(wrapper, tmp_path / "script.json", tmp_path / "claude-calls.jsonl")
    agent.answers({"status": "success", "reason": "done"})
    for key, value in agent.env().items():
        monkeypatch.setenv(key, value)
    return agent


GITHUB_REPO = "acme/app"


@pytest.fixture
def fake_github(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A local GitHub REST API on 127.0.0.1 with `acme/app` (a `maintainer` with write access)
    and a token in the environment; each test adds its own issues."""
    from tests.fakes.github_server import FakeGitHub

    monkeypatch.setenv("GITHUB_TOKEN", "test-token-abc")
    fake = FakeGitHub().start()
    fake.add_repo(GITHUB_REPO, {"maintainer": "write"})
    yield fake
    fake.stop()


@pytest.fixture
def only_the_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """No reviewer agents and no fallback maintenance task: a run does what the test queued.
    A module uses it with `pytestmark = pytest.mark.usefixtures("only_the_task")`."""
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")


BOT_TOKEN = "123456:test-bot-token-xyz"


@pytest.fixture
def bot(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A local Telegram Bot API on 127.0.0.1, its token (`BOT_TOKEN`) in the environment."""
    from tests.fakes.bot_api import FakeBotAPI

    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", BOT_TOKEN)
    server = FakeBotAPI(BOT_TOKEN).start()
    yield server
    server.stop()


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace whose inbox is `ws/inbox`, where the suite's tests write their messages,
    and whose wait states are in `ws/wait_states` (`wait_states_dir = "wait_states"`, as for
    any other workspace of the test), where they read them.
    An inbox inside the working tree must be allowed explicitly; the default (outside it) and
    the refusal are proved in tests/test_agent_boundaries.py, the default wait-state folder
    (in the state folder) in tests/test_lockout.py."""
    ws = tmp_path / "ws"
    (ws / "inbox").mkdir(parents=True)
    monkeypatch.setenv("WORKER_INBOX", str(ws / "inbox"))
    monkeypatch.setenv("WORKER_ALLOW_INBOX_IN_WORKSPACE", "true")
    monkeypatch.setenv("WORKER_WAIT_STATES_DIR", "wait_states")  # each workspace's own
    return ws


def rewrite_wait(ws: Path, path: Path, data: dict[str, Any]) -> None:
    """Change a wait as worker itself would (its record and its file), e.g. to move its resume
    time: an edit of the file alone is ignored (tests/test_agent_boundaries.py)."""
    from worker.config import load_settings
    from worker.waits.record import save_wait
    from worker.waits.state import WaitState

    save_wait(load_settings(ws), WaitState.model_validate(data), name=path.name)


def save_approval_wait(settings: Any, store: Any, task_id: str, **fields: Any) -> Path:
    """Record a wait for a user's approval, now, as worker records it; `fields` add to or
    replace the state's own."""
    from worker.waits.record import save_wait
    from worker.waits.state import WaitState

    state = {
        "taskId": task_id,
        "timestamp": datetime.now(UTC).isoformat(),
        "reason": "r",
        "waitFor": "an approval",
        "resumeWhen": "user_approval",
        "context": {"mode": "code-simple", "model": "haiku", "iteration": 1},
        **fields,
    }
    return save_wait(settings, WaitState.model_validate(state), store)


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run a real git command in ``cwd`` and return its standard output."""
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True, env=env
    ).stdout


def status_block(state: str, reason: str, **fields: str) -> str:
    """An agent's STATUS block, as an agent would end its answer."""
    extra = "".join(f"{key.upper()}: {value}\n" for key, value in fields.items())
    return f"=== AGENT STATUS ===\nSTATUS: {state}\nREASON: {reason}\n{extra}===================\n"


# Token-shaped values planted in the environment to prove none of them leaks.
TOKENS = {
    "GITHUB_TOKEN": "ghp_github0token0value0000000000000000",
    "WORKER_GITHUB_TOKEN": "ghp_worker0token0value0000000000000000",
    "GH_TOKEN": "gho_gh0cli0token0value00000000000000000",
    "WORKER_GIT_TOKEN": "ghs_git0push0token0value000000000000000",
}


def state_of(ws: Path) -> Path:
    """The workspace's state folder (under the test's XDG_STATE_HOME by default)."""
    from worker.config import load_settings

    return load_settings(ws).state


def write_message(ws: Path, msg_id: str, **fields: Any) -> Path:
    data = {
        "id": msg_id,
        "from": "alice",
        "to": "test-machine",
        "subject": f"task {msg_id}",
        "body": "Please do the thing.",
        "status": "unread",
        "priority": "normal",
        "created_at": "2026-11-20T10:00:00Z",
        **fields,
    }
    path = ws / "inbox" / f"{msg_id}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def run_worker(
    ws: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The real `worker` command in a subprocess (python -m worker)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "worker", *args, "--workspace", str(ws)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def cli() -> Iterator[Any]:
    from typer.testing import CliRunner

    yield CliRunner()


# -- the real Claude Code against a scripted Messages API (tests/fakes/anthropic_api.py) ------
REAL_CLAUDE = REPO / "tests" / "realcli" / "node_modules" / ".bin" / "claude"


@pytest.fixture
def claude_api(tmp_path: Path) -> Iterator[Any]:
    """A scripted Anthropic Messages API on 127.0.0.1 (`AnthropicAPI`); stopped after the test.
    Script it with `claude_api.script(text(...), tool_use(...))`, `.always(failure(529))`."""
    from tests.fakes.anthropic_api import AnthropicAPI

    api = AnthropicAPI().start()
    yield api
    api.stop()


def run_with_real_claude(
    ws: Path, api: Any, *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`worker <args>` on `ws` with the real Claude Code (the pinned one), talking only to
    `api`, in a home folder of its own beside the workspace."""
    home = ws.parent / "claude-home"
    home.mkdir(exist_ok=True)
    full = {
        **api.env(str(home)),
        "WORKER_CLAUDE_BIN": str(REAL_CLAUDE),
        "WORKER_REVIEW__ENABLED": "false",
        **(env or {}),
    }
    return run_worker(ws, *args, env=full, timeout=timeout)


def aged(*paths: Path, seconds: float = 60) -> None:
    """Date files `seconds` back: a bad inbox message this young is left for its writer to
    finish (tests/test_hunt2_inbox.py), one older is rejected at once."""
    then = time.time() - seconds
    for path in paths:
        os.utime(path, (then, then))
