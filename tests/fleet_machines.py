"""Several machines on one host for the fleet tests: `worker serve` processes, each with its
own workspace and state, a machine id, the shared inbox folder and the one fleet database."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import FAKE_CLAUDE
from worker.fleet.db import connect
from worker.fleet.settings import FleetSettings

_TASK_LINE = re.compile(r"fleet-task (\S+)")


@dataclass
class Machine:
    name: str
    workspace: Path
    log: Path  # the fake agent's calls on this slot
    proc: subprocess.Popen[str] | None = None


@dataclass
class Fleet:
    root: Path
    url: str = field(repr=False)  # it holds the password
    inbox: Path = field(init=False)
    machines: list[Machine] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.inbox = self.root / "inbox"
        self.inbox.mkdir(parents=True, exist_ok=True)
        wrapper = self.root / "claude"
        wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_CLAUDE} "$@"\n')
        wrapper.chmod(0o755)
        self.script = self.root / "script.json"
        self.answers({"status": "success", "reason": "done"})
        connect(FleetSettings(database_url=self.url)).close()  # the schema, before any query

    def answers(self, *answers: dict[str, Any]) -> None:
        self.script.write_text(json.dumps({"answers": list(answers)}), encoding="utf-8")

    def messages(self, count: int, to: str = "all") -> list[str]:
        ids = [f"msg-{n:04d}" for n in range(count)]
        for msg_id in ids:
            data = {
                "id": msg_id,
                "from": "alice",
                "to": to,
                "subject": f"fleet-task {msg_id}",
                "body": "Do it once.",
                "status": "unread",
                "priority": "normal",
                "created_at": "2026-11-20T10:00:00Z",
            }
            (self.inbox / f"{msg_id}.json").write_text(json.dumps(data), encoding="utf-8")
        return ids

    def env(self, machine: Machine) -> dict[str, str]:
        return {
            **os.environ,
            "WORKER_MACHINE_ID": machine.name,
            "WORKER_INBOX": str(self.inbox),
            "WORKER_FLEET__DATABASE_URL": self.url,
            "WORKER_FLEET__HEARTBEAT_S": "0.5",
            "WORKER_FALLBACK__ENABLED": "false",
            "WORKER_REVIEW__ENABLED": "false",
            "WORKER_DAEMON__INBOX_POLL_S": "0.2",
            "WORKER_CLAUDE_BIN": str(self.root / "claude"),
            "FAKE_CLAUDE_SCRIPT": str(self.script),
            "FAKE_CLAUDE_LOG": str(machine.log),
            **self.extra_env,
        }

    def add(self, name: str, slot: int = 0) -> Machine:
        workspace = self.root / f"{name}-{slot}"
        workspace.mkdir()
        machine = Machine(name, workspace, self.root / f"calls-{name}-{slot}.jsonl")
        self.machines.append(machine)
        return machine

    def serve(self, machine: Machine, interval: float = 0.05) -> Machine:
        machine.proc = subprocess.Popen(
            [sys.executable, "-m", "worker", "serve", "--interval", str(interval),
             "--workspace", str(machine.workspace)],
            env=self.env(machine), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        return machine

    def cli(self, *args: str, machine: Machine | None = None) -> subprocess.CompletedProcess[str]:
        machine = machine or self.machines[0]
        return subprocess.run(
            [sys.executable, "-m", "worker", *args, "--workspace", str(machine.workspace)],
            env=self.env(machine), capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    def stop_all(self) -> list[str]:
        """SIGTERM every server, wait, and return their output (stdout + stderr)."""
        outputs = []
        for machine in self.machines:
            if machine.proc is not None and machine.proc.poll() is None:
                machine.proc.send_signal(signal.SIGTERM)
        for machine in self.machines:
            if machine.proc is not None:
                out, err = machine.proc.communicate(timeout=120)
                outputs.append(out + err)
        return outputs

    def done(self) -> int:
        folder = self.inbox / "done"
        return len(list(folder.glob("msg-*.json"))) if folder.is_dir() else 0

    def agent_runs(self) -> Counter[str]:
        """How many times the agent was started on each message, over every machine."""
        seen: Counter[str] = Counter()
        for log in {machine.log for machine in self.machines}:
            if log.exists():
                for line in log.read_text(encoding="utf-8").splitlines():
                    found = _TASK_LINE.search(json.loads(line)["stdin"])
                    if found:
                        seen[found.group(1)] += 1
        return seen

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url) as conn:
            return list(conn.execute(sql, params).fetchall())


def wait_for(check: Callable[[], bool], what: str, timeout: float = 180.0) -> None:
    """Poll until `check()` holds; the timeout only ends a hung test, it measures nothing."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.2)
