"""The daily maintenance task: build and test the workspace; call the agent only on failure.

Commands come from `[fallback]` in worker.toml, or are detected from the project type. When
every command passes the task succeeds without any agent call; otherwise the agent is asked to
repair what failed, and the verify step runs the failing commands again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from worker.config import Settings
from worker.models import Task
from worker.platform.shell import shell_command
from worker.sources.base import Listing, Skipped
from worker.store import Store

if TYPE_CHECKING:
    from worker.results import TaskResult

LAST_RUN_KEY = "fallback.last_run"

# Project markers, checked in order; the first that matches gives the commands.
_DETECT: list[tuple[str, list[str], list[str]]] = [
    ("pyproject.toml", [], ["python -m pytest -q"]),
    ("package.json", ["npm run build --if-present"], ["npm test"]),
    ("Cargo.toml", ["cargo build"], ["cargo test"]),
    ("go.mod", ["go build ./..."], ["go test ./..."]),
    ("Makefile", ["make"], ["make test"]),
]


@dataclass
class CheckResult:
    command: str
    exit_code: int | None
    output_tail: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def maintenance_commands(settings: Settings) -> list[str]:
    conf = settings.fallback
    if conf.build is not None or conf.test is not None:
        return [*(conf.build or []), *(conf.test or [])]
    for marker, build, test in _DETECT:
        if (settings.workspace / marker).is_file():
            return [*build, *test]
    return []


def run_checks(
    commands: list[str], cwd: Path, timeout_s: float, log_dir: Path | None
) -> list[CheckResult]:
    # The process layer only when the checks run, not for each run that lists the task.
    from worker.proc import child_env, run_process

    results = []
    for number, command in enumerate(commands, start=1):
        argv, variables = shell_command(command)  # /bin/sh, or cmd.exe on Windows
        log_path = log_dir / f"check-{number}.log" if log_dir else None
        proc = run_process(
            argv,
            cwd=cwd,
            timeout_s=timeout_s,
            env={**child_env(), **variables},
            log_path=log_path,
            cap_bytes=200_000,
        )
        tail = (proc.stdout[-3000:] + "\n" + proc.stderr_tail[-2000:]).strip()
        results.append(CheckResult(command, proc.exit_code, tail, proc.timed_out))
    return results


def failure_report(results: list[CheckResult]) -> str:
    parts = []
    for check in results:
        if check.ok:
            continue
        how = "timed out" if check.timed_out else f"exit code {check.exit_code}"
        parts.append(f"$ {check.command}  ({how})\n{check.output_tail}")
    return "\n\n".join(parts)


class FallbackSource:
    name = "fallback"

    def __init__(self, settings: Settings, store: Store | None, last_run: float | None) -> None:
        self.settings = settings
        self.store = store
        self.last_run = last_run

    def task(self, now: float | None = None) -> Task | None:
        now = time.time() if now is None else now
        day = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")
        commands = maintenance_commands(self.settings)
        return Task(
            id=f"maintenance-{day}",
            source=self.name,
            title="Daily maintenance: build and tests",
            body="",
            mode=self.settings.fallback.mode,
            priority=9,
            ref={"commands": commands},
        )

    def list(self, now: float | None = None) -> Listing:
        listing = Listing(self.name)
        now = time.time() if now is None else now
        if not self.settings.fallback.enabled:
            listing.skipped.append(Skipped("maintenance", "FALLBACK_DISABLED"))
            return listing
        task = self.task(now)
        assert task is not None
        if not task.ref["commands"]:
            listing.skipped.append(
                Skipped(
                    task.id,
                    "NO_MAINTENANCE_COMMANDS",
                    "no build or test command configured or detected",
                )
            )
            return listing
        interval = self.settings.fallback.interval_hours * 3600
        if self.last_run is not None and now - self.last_run < interval:
            listing.skipped.append(Skipped(task.id, "FALLBACK_NOT_DUE"))
            return listing
        listing.tasks.append(task)
        return listing

    def find(self, task_id: str) -> Task | None:
        task = self.task()
        return task if task is not None and task_id.startswith("maintenance") else None

    def claim(self, task: Task, run_id: int) -> bool:
        assert self.store is not None
        # Mark the day's maintenance as taken at once: a failing build is not retried in a
        # tight loop by every run; the next attempt comes after the interval.
        self.store.put(LAST_RUN_KEY, str(time.time()))
        return self.store.claim(
            task.id,
            self.name,
            self.settings.machine_id,
            0,
            self.settings.lease_seconds,
            run_id=run_id,
        )

    def renew(self, task: Task) -> None:
        if self.store is not None:
            self.store.renew_claim(task.id, self.settings.lease_seconds)

    def release(self, task: Task, result: TaskResult) -> None:
        if self.store is not None:
            self.store.release_claim(task.id, result.outcome.value)

    def report(self, task: Task, result: TaskResult) -> None:
        """Maintenance has no requester: the run record and status report are its report."""
