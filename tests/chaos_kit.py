"""Workspaces, forked workers and the final accounting shared by the chaos tests.

Workers are forked from the test process (no interpreter start per run) and call the library
API, `run_once`, as `worker run` does. The agent is the `command` adapter running `sh`: it
records each prompt it gets (one file per invocation) and answers STATUS: success.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from worker.config import Settings, load_settings
from worker.errors import LockHeld
from worker.models import Outcome
from worker.run.runner import run_once
from worker.state.store import Store

AGENT_SCRIPT = (
    'f=$(mktemp "$0/$$.XXXXXX"); cat > "$f"; sleep "$1"; '
    "printf '=== AGENT STATUS ===\\nSTATUS: success\\nREASON: done\\n===================\\n'"
)


def make_workspace(
    root: Path, name: str, *, inbox: Path | None = None, agent_sleep: float = 0.0
) -> Path:
    """A workspace whose only mode runs the recording `sh` agent; reviewers and the daily
    maintenance task off, so that every run is about one message."""
    ws = root / name
    (ws / "modes").mkdir(parents=True)
    marks = root / "prompts"
    marks.mkdir(exist_ok=True)
    mode = {
        "id": "quick",
        "model": "none",
        "maxIterations": 1,
        "agent": "command",
        "command": ["sh", "-c", AGENT_SCRIPT, str(marks), str(agent_sleep)],
        "default": True,
    }
    (ws / "modes" / "modes.json").write_text(json.dumps({"modes": [mode]}))
    # Without a shared inbox, the messages go to `ws/inbox` (allowed explicitly: the default
    # inbox lies outside the working tree).
    inbox_line = (
        f'inbox_dir = "{inbox}"\n'
        if inbox is not None
        else 'inbox_dir = "inbox"\nallow_inbox_in_workspace = true\n'
    )
    (ws / "worker.toml").write_text(
        f'machine_id = "{name}"\nlease_seconds = 1\n{inbox_line}'
        "[fallback]\nenabled = false\n[review]\nenabled = false\n"
    )
    (inbox or ws / "inbox").mkdir(parents=True, exist_ok=True)
    return ws


def drop_messages(inbox: Path, ids: list[str]) -> None:
    for msg_id in ids:
        data = {
            "id": msg_id,
            "from": "alice",
            "to": "all",
            "subject": f"chaos {msg_id} end",
            "body": "do it",
            "created_at": "2026-11-20T10:00:00Z",
        }
        (inbox / f"{msg_id}.json").write_text(json.dumps(data))


def settings_of(ws: Path) -> Settings:
    # The stand-in agent logs outside the tree, which the sandbox would refuse it.
    return load_settings(ws, env={}, sandbox={"mode": "off", "untrusted_mode": "off"})


def drain(
    settings: Settings, patch: Callable[[], None] | None = None, max_runs: int = 1000
) -> None:
    """Run until two runs in a row find nothing to do, or `max_runs` runs; a held lock means
    try again (many times: seven other processes may be queueing for it)."""
    if patch is not None:
        patch()
    idle = runs = 0
    for _ in range(max_runs * 100):
        try:
            report = run_once(settings)
        except LockHeld:
            time.sleep(random.uniform(0.001, 0.01))
            continue
        runs += 1
        idle = idle + 1 if report.outcome is Outcome.IDLE else 0
        if idle >= 2 or runs >= max_runs:
            return


def fork(target: Callable[[], None]) -> int:
    """Run `target` in a child process that never returns into the test."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            target()
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    return pid


def wait_all(pids: list[int]) -> list[int]:
    return [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]


def kill_at_random(target: Callable[[], None], rng: random.Random, within_s: float) -> bool:
    """Start `target` in a child and SIGKILL it at a random moment (maybe after it ended);
    True when the kill is what ended it."""
    pid = fork(target)
    time.sleep(rng.uniform(0, within_s))
    with contextlib.suppress(ProcessLookupError):  # it ended before the kill
        os.kill(pid, signal.SIGKILL)
    status = os.waitpid(pid, 0)[1]
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


@dataclass
class Accounting:
    """Where every message ended up, counted by id (never by file name)."""

    done: Counter[str] = field(default_factory=Counter)
    stranded: list[str] = field(default_factory=list)  # still in the inbox or claimed/
    rejected: list[str] = field(default_factory=list)
    replies: Counter[str] = field(default_factory=Counter)
    runs_of: Counter[str] = field(default_factory=Counter)  # agent invocations per task
    active_claims: list[str] = field(default_factory=list)
    orphans: list[int] = field(default_factory=list)  # agent processes still alive


def account(inbox: Path, root: Path, ids: list[str], stores: list[Path]) -> Accounting:
    acc = Accounting()
    for path in _json(inbox / "done"):
        acc.done[json.loads(path.read_text())["id"]] += 1
    for folder in (inbox, inbox / "claimed"):
        acc.stranded += [json.loads(p.read_text())["id"] for p in _json(folder)]
    acc.rejected = [p.name for p in _json(inbox / "rejected")]
    for path in _json(inbox / "outbox"):
        acc.replies[json.loads(path.read_text())["in_reply_to"]] += 1
    wanted = set(ids)
    for path in (root / "prompts").iterdir():
        words = path.read_text().split()
        for i, word in enumerate(words[:-1]):
            if word == "chaos" and words[i + 1] in wanted:
                acc.runs_of[words[i + 1]] += 1
                break
        pid = int(path.name.split(".")[0])
        if _running(pid, root / "prompts"):
            acc.orphans.append(pid)
    for db in stores:
        if db.exists():
            with Store(db) as store:
                acc.active_claims += [c["task_id"] for c in store.active_claims()]
    return acc


def _json(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def _running(pid: int, marks: Path) -> bool:
    """An agent of ours still running (its command line names the prompts folder)."""
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and str(marks) in process.cmdline()
    except psutil.Error:
        return False


def history_gaps(db: Path, ids: list[str]) -> tuple[list[int], list[str]]:
    """The runs left without an end, and the tasks with no `success` run on record."""
    with Store(db) as store:
        still_open = [r[0] for r in store.db.execute("SELECT id FROM runs WHERE ended_at IS NULL")]
        done = {
            r[0] for r in store.db.execute("SELECT task_id FROM runs WHERE outcome = 'success'")
        }
    return still_open, [task for task in ids if task not in done]
