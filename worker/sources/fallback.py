"""The daily maintenance task: build and test the workspace; call the agent only on failure.

Commands come from `[fallback]` in worker.toml, or are detected from how the project runs its
checks (`sources/project_checks.py`: its virtual environment, uv, Poetry, npm, ...). When every
command passes the task succeeds without any agent call. A check that could not run (a
missing command or module, no tests) is a set-up problem: no agent starts, the problem is
remembered with a fingerprint of what decides the checks, and maintenance is not tried again
until that fingerprint changes or the interval passes. Only checks that ran and failed go to
the agent, and the verify step runs them again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worker.config import Settings
from worker.models import SETUP_PROBLEM, Task
from worker.process.lazyimport import lazy
from worker.process.platform.shell import shell_command
from worker.sources.base import Listing, Skipped
from worker.sources.project_checks import CheckPlan, cannot_run, detect_plan
from worker.state.store import Store

if TYPE_CHECKING:
    from worker.results import TaskResult

sqlite3 = lazy("sqlite3")  # only to read a remembered set-up problem without a store
_programs = lazy("worker.sandbox.programs")  # only when the checks run

LAST_RUN_KEY = "fallback.last_run"
SETUP_KEY = "fallback.setup_problem"  # the remembered set-up problem (JSON), "" when none
SETUP_PROBLEM_KNOWN = "SETUP_PROBLEM_KNOWN"  # the same problem as last time: told once


@dataclass
class CheckResult:
    command: str
    exit_code: int | None
    output_tail: str
    timed_out: bool = False
    problem: str | None = None  # it never really ran: a set-up problem, in words
    where: str = ""  # in the sandbox, or outside it and why (worker/sandbox/programs.py)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass(frozen=True)
class Policy:
    """Whether maintenance runs in this workspace, and why, in words (`doctor` says it)."""

    on: bool
    why: str
    code: str = ""  # the reason code when off


def policy(settings: Settings, plan: CheckPlan | None = None) -> Policy:
    """On when asked (`[fallback] enabled = true`) or, by default, where the workspace has
    checks worker can run: configured commands, or an environment of the project's own.
    A workspace with none (a GitHub-only workspace, a project without its test environment)
    gets no daily run that could only fail and leave a branch behind."""
    enabled = settings.fallback.enabled
    if enabled is False:
        return Policy(False, "maintenance is off ([fallback] enabled = false)", "FALLBACK_DISABLED")
    plan = plan or detect_plan(settings)
    if enabled:
        return Policy(True, "maintenance is on ([fallback] enabled = true)")
    if not plan.commands:
        why = "no build or test command configured or detected"
        return Policy(False, f"maintenance is off: {why}", "NO_MAINTENANCE_COMMANDS")
    if plan.problem or not plan.own_env:
        why = plan.problem or f"no environment of the project's own, only {plan.environment}"
        return Policy(
            False,
            f"maintenance is off: this workspace has no checks worker can run ({why}); set "
            "[fallback] test (and build) to the commands that run them, or enabled = true",
            "MAINTENANCE_NOT_RUNNABLE",
        )
    return Policy(True, f"maintenance is on: the checks run in {plan.environment}")


def maintenance_commands(settings: Settings) -> list[str]:
    return detect_plan(settings).commands


def run_checks(
    commands: list[str],
    cwd: Path,
    timeout_s: float,
    log_dir: Path | None,
    *,
    settings: Settings,
    own_env: bool = True,
) -> list[CheckResult]:
    """Run each command through the shell, in the box the task's `settings` choose (the
    project's programs are as untrusted as the agent that may have written them), its output
    (stdout and stderr, in order) in `check-<K>.log`; a check that could not run carries its
    set-up problem."""
    # The process layer only when the checks run, not for each run that lists the task.
    from worker.process.proc import run_process

    where = _programs.place(settings)
    results = []
    for number, command in enumerate(commands, start=1):
        shell, variables = shell_command(command)  # /bin/sh, or cmd.exe on Windows
        log_path = log_dir / f"check-{number}.log" if log_dir else None
        with _programs.boxed(where, shell, cwd, variables) as (argv, env):
            proc = run_process(
                argv,
                cwd=cwd,
                timeout_s=timeout_s,
                env=env,
                log_path=log_path,
                cap_bytes=200_000,
                merge_stderr=True,  # the log holds what a person would have seen, in order
            )
        output = (proc.stdout + proc.stderr_tail).strip()
        result = CheckResult(command, proc.exit_code, output[-5000:], proc.timed_out)
        result.where = where.words
        if not result.ok and not proc.timed_out:
            result.problem = cannot_run(
                command, proc.exit_code, output, own_env=own_env, boxed=where.box is not None
            )
        results.append(result)
    return results


def failure_report(results: list[CheckResult]) -> str:
    parts = []
    for check in results:
        if check.ok:
            continue
        how = "timed out" if check.timed_out else f"exit code {check.exit_code}"
        how += f", {check.where}" if check.where else ""
        parts.append(f"$ {check.command}  ({how})\n{check.output_tail}")
    return "\n\n".join(parts)


class FallbackSource:
    name = "fallback"

    def __init__(self, settings: Settings, store: Store | None, last_run: float | None) -> None:
        self.settings = settings
        self.store = store
        self.last_run = last_run

    def task(self, now: float | None = None, plan: CheckPlan | None = None) -> Task | None:
        now = time.time() if now is None else now
        day = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")
        plan = plan or detect_plan(self.settings)
        return Task(
            id=f"maintenance-{day}",
            source=self.name,
            title="Daily maintenance: build and tests",
            body="",
            mode=self.settings.fallback.mode,
            priority=9,
            ref={
                "commands": plan.commands,
                "environment": plan.environment,
                "problem": plan.problem,
                "own_env": plan.own_env,
            },
        )

    def list(self, now: float | None = None) -> Listing:
        listing = Listing(self.name)
        now = time.time() if now is None else now
        plan = detect_plan(self.settings) if self.settings.fallback.enabled is not False else None
        said = policy(self.settings, plan)
        if not said.on:
            listing.skipped.append(Skipped("maintenance", said.code, said.why))
            return listing
        task = self.task(now, plan)
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
        if self.last_run is None or now - self.last_run >= interval:
            listing.tasks.append(task)
            return listing
        known = load_problem(self.settings, self.store)
        if known is None:
            listing.skipped.append(Skipped(task.id, "FALLBACK_NOT_DUE"))
        elif known.fingerprint == fingerprint(self.settings):
            # Told once; tried again when what decides the checks changes, or after the interval.
            listing.skipped.append(Skipped(task.id, SETUP_PROBLEM, known.problem))
        else:
            listing.tasks.append(task)  # the project or settings changed: maybe it is fixed
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


# -- the remembered set-up problem --------------------------------------------------------------
@dataclass(frozen=True)
class SetupProblem:
    """A set-up problem maintenance met: what, since when, last seen, and the fingerprint of
    what decided the checks then (`CheckPlan.fingerprint`)."""

    problem: str
    fingerprint: str
    since: float
    seen: float
    environment: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def load_problem(settings: Settings, store: Store | None) -> SetupProblem | None:
    """The set-up problem remembered in the database (read-only without a store: a dry run,
    `worker status`, `worker doctor` write nothing)."""
    return _parse(store.get(SETUP_KEY) if store is not None else _read_only(settings.db_path))


def fingerprint(settings: Settings) -> str:
    """What decides the checks now (a few milliseconds: read only with a problem to match)."""
    return detect_plan(settings).fingerprint(settings.workspace)


def remember_problem(store: Store, settings: Settings, task: Task, problem: str) -> bool:
    """Remember the problem with the fingerprint of what decides the checks now (after they
    ran: a tool that made the environment counts); True when it is news (not the problem
    already remembered), which is when a person is told."""
    now = time.time()
    known = _parse(store.get(SETUP_KEY))
    news = known is None or known.problem != problem
    since = now if news or known is None else known.since
    environment = str(task.ref.get("environment", ""))
    entry = SetupProblem(problem, fingerprint(settings), since, now, environment)
    store.put(SETUP_KEY, json.dumps(entry.as_dict()))
    return news


def _parse(raw: str | None) -> SetupProblem | None:
    if not raw:
        return None
    try:
        return SetupProblem(**json.loads(raw))
    except (ValueError, TypeError):
        return None  # an unreadable memory is no memory: the checks run and say again


def forget_problem(store: Store) -> None:
    """The checks ran: whatever was remembered is solved."""
    if store.get(SETUP_KEY):
        store.put(SETUP_KEY, "")


def _read_only(db_path: Path) -> str | None:
    if not db_path.exists():
        return None
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM kv WHERE key = ?", (SETUP_KEY,)).fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return row[0] if row else None
