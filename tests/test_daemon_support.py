"""Helpers for the daemon tests: small settings, fake children committed to real git repos.

A fake child is a tiny Python script that speaks the real health contract (worker.daemon.health)
the way `worker serve` does, so the supervisor cannot tell it from the real thing.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worker.config import Settings, load_settings
from worker.daemon.supervisor import Supervisor
from worker.process.proc import run_process

_PRELUDE = """
import signal, sys, time
from pathlib import Path
from worker.config import load_settings
from worker.daemon import health
from worker.state.store import Store
settings = load_settings(Path(sys.argv[1]))
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
if hasattr(signal, "SIGBREAK"):  # Windows: how the supervisor asks (CTRL_BREAK_EVENT)
    signal.signal(signal.SIGBREAK, lambda *a: stop.append(1))
"""

CHILDREN = {
    # Ready at once, beats until SIGTERM, then says it stopped: a healthy `worker serve`.
    "healthy": """
store = Store(settings.db_path)
health.mark_ready(store, settings.state)
while not stop:
    health.beat(store, phase="idle")
    time.sleep(0.02)
health.mark_stopped(store, settings.state, "SIGTERM")
""",
    # Dies before it is ready: a broken revision.
    "crash": """
sys.exit(3)
""",
    # Runs but never says it is ready: a start that hangs.
    "never_ready": """
while not stop:
    time.sleep(0.02)
""",
}


def child_script(kind: str, marker: str | None = None) -> str:
    """The source of a fake child; `marker` names a file it creates in the workspace first."""
    body = CHILDREN[kind]
    if marker is not None:
        body = f"(Path(sys.argv[1]) / {marker!r}).write_text('started')\n" + body
    return textwrap.dedent(_PRELUDE) + textwrap.dedent(body)


def write_config(ws: Path, **daemon: Any) -> None:
    """A worker.toml with a fast `[daemon]` section; keyword arguments override it."""
    values: dict[str, Any] = {
        "poll_s": 0.02,
        "backoff_base_s": 0.02,
        "backoff_cap_s": 0.2,
        "backoff_reset_s": 3600.0,
        "crash_loop_count": 3,
        "crash_loop_window_s": 3600.0,
        "startup_timeout_s": 60.0,
        "stable_window_s": 0.3,
        "revision_poll_s": 0.05,
        "heartbeat_timeout_s": 60.0,
        "stop_grace_s": 10.0,
        "child_command": ["{python}", "child.py", "{workspace}"],
        "allow_root": True,  # these tests run as root in some containers
        **daemon,
    }
    lines = ["[daemon]"]
    for key, value in values.items():
        if value is None:  # TOML has no null: leave the default
            continue
        lines.append(f"{key} = {_toml(value)}")
    (ws / "worker.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


class Repo:
    """A real git repository in tmp_path holding the fake child as `child.py`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True)
        self.git("init", "-q")
        self.git("config", "user.email", "test@example.invalid")
        self.git("config", "user.name", "test")

    def git(self, *args: str) -> str:
        result = run_process(["git", *args], cwd=self.path, timeout_s=60)
        assert result.exit_code == 0, result.stderr_tail
        return result.stdout.strip()

    def commit(self, files: dict[str, str], message: str = "rev") -> str:
        for name, text in files.items():
            (self.path / name).write_text(text, encoding="utf-8")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")


def settings_for(ws: Path, repo: Repo | None = None, **daemon: Any) -> Settings:
    if repo is not None:
        daemon.setdefault("repo", str(repo.path))
    else:
        daemon.setdefault("track_revisions", False)
    write_config(ws, **daemon)
    return load_settings(ws)


def until(cond: Callable[[Supervisor], bool], max_ticks: int = 20_000) -> Callable[..., bool]:
    """Stop the supervisor when `cond` holds; a tick budget keeps a broken test from hanging."""
    ticks = [0]

    def check(sup: Supervisor) -> bool:
        ticks[0] += 1
        return cond(sup) or ticks[0] >= max_ticks

    return check


def kinds(sup_or_events: Any) -> list[str]:
    events = sup_or_events if isinstance(sup_or_events, list) else sup_or_events.state.events(500)
    return [e["kind"] for e in events]


PYTHON = sys.executable
