"""`worker doctor`: check what a run needs, and say what to fix.

A check is a name and a function from the `Context` to findings (ok / warn / fail, each with a
message that says what to fix). `CHECKS` is the ordered registry: a new check is one function and
one line in that list. Exit 0 when nothing fails, 78 (EX_CONFIG) otherwise.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any

from worker.agents import gemini_setup
from worker.agents.infra import cli_name, executable_problem
from worker.config import Settings
from worker.delivery import IN_PLACE, deliveries, delivery_lines
from worker.errors import ExitCode, WorkerError
from worker.modes import Mode, ModeSet, load_modes, modes_path
from worker.operator import config_sources, heartbeat, integrity
from worker.operator.notify import checkup as notify_checkup
from worker.process.platform.installed import job_locations, scheduled_jobs
from worker.process.platform.schedule import schedule_env
from worker.process.proc import run_process
from worker.process.workspace_git import delivery_problem
from worker.review.settings import reviewers_line
from worker.sandbox import report as sandbox_report
from worker.sources.fallback import load_problem, policy
from worker.sources.github.client import GitHubClient, make_client
from worker.sources.github.http import TOKEN_VARIABLES, GitHubError, token_from_env
from worker.sources.project_checks import detect_plan, probe, where_words
from worker.state import statedir

# The versions the conformance tests drive (tests/realcli/package.json): another major.minor
# may print a stream worker has not been checked against.
TESTED_VERSIONS = {"claude": "2.1", "codex": "0.169", "gemini": "0.61"}
_VERSION_TIMEOUT_S = 30.0  # `--version` answers at once; one that hangs is a finding
_VERSION = re.compile(r"\b(\d+)\.(\d+)\.(\d+)")
_STRONG_ENOUGH = ("admin", "maintain", "push")


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    message: str


@dataclass
class Context:
    """What the checks read: the settings and the environment a scheduled run will have."""

    settings: Settings
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    modes_error: str | None = None

    @cached_property
    def modes(self) -> ModeSet | None:
        try:
            return load_modes(modes_path(self.settings.workspace, self.settings.modes_file))
        except WorkerError as exc:
            self.modes_error = str(exc)
            return None

    def agents(self) -> dict[str, list[Mode]]:
        """Each agent the modes use, with the modes that use it."""
        used: dict[str, list[Mode]] = {}
        for mode in self.modes.modes.values() if self.modes else ():
            used.setdefault(mode.agent, []).append(mode)
        return used


Check = Callable[[Context], Iterable[Finding]]


@dataclass(frozen=True)
class DoctorReport:
    findings: list[Finding]

    @property
    def ok(self) -> bool:
        return all(finding.status is not Status.FAIL for finding in self.findings)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.ok else ExitCode.CONFIG

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "findings": [
                {"check": f.check, "status": f.status.value, "message": f.message}
                for f in self.findings
            ],
        }


def run_doctor(
    settings: Settings,
    env: Mapping[str, str] | None = None,
    checks: Iterable[tuple[str, Check]] | None = None,
) -> DoctorReport:
    context = Context(settings, dict(os.environ) if env is None else env)
    findings: list[Finding] = []
    for name, check in CHECKS if checks is None else checks:
        try:
            findings.extend(check(context))
        except Exception as exc:  # one broken check must not hide the others' answers
            findings.append(Finding(name, Status.FAIL, f"the check itself failed: {exc!r}"))
    return DoctorReport(findings)


# -- the checks -------------------------------------------------------------------------------
def check_config(context: Context) -> Iterable[Finding]:
    """What loading worker.toml and WORKER_* found: each problem with its fix (doctor loads
    the settings leniently, so it runs and reports whatever is wrong)."""
    for problem in context.settings.problems:
        status = Status.FAIL if problem.fatal else Status.WARN
        yield Finding("config", status, str(problem))
    if not context.settings.problems:
        yield Finding("config", Status.OK, "worker.toml and the WORKER_* variables are valid")
    yield Finding(
        "config", Status.OK, f"read in this order: {config_sources.layers_line(context.settings)}"
    )
    for line in config_sources.given(context.settings):
        yield Finding("config", Status.OK, line)


def check_modes(context: Context) -> Iterable[Finding]:
    modes = context.modes
    if modes is None:
        yield Finding("modes", Status.FAIL, f"{context.modes_error} (see `worker modes validate`)")
    else:
        yield Finding("modes", Status.OK, f"{len(modes.modes)} valid modes from {modes.source}")


def check_agents(context: Context) -> Iterable[Finding]:
    settings = context.settings
    for agent, modes in context.agents().items():
        if agent == "command":
            for mode in modes:
                program = (mode.command or [""])[0]
                yield _command_found(program, mode.id, context.env)
            continue
        setting = f"{agent}_bin"
        executable = getattr(settings, setting, agent)
        names = ", ".join(mode.id for mode in modes)
        yield _version_finding(agent, executable, setting, names, settings.workspace)


def check_state(context: Context) -> Iterable[Finding]:
    state = context.settings.state
    try:
        state.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=state, prefix=".doctor-", delete=True) as probe:
            probe.write(b"ok")
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        yield Finding(
            "state",
            Status.FAIL,
            f"the state folder {state} is not writable ({exc.strerror}): fix its permissions "
            "or set state_dir",
        )
        return
    yield Finding("state", Status.OK, f"the state folder {state} is writable")


def check_reach(context: Context) -> Iterable[Finding]:
    """worker's own folders inside the working tree can be written by the agent."""
    settings = context.settings
    for key in statedir.exposed(settings):
        folder = settings.state if key == "state_dir" else settings.inbox
        yield Finding(
            "reach",
            Status.WARN,
            f"{key} ({folder}) lies inside the working tree, where the agent can write: move it "
            "out (the default is outside), see the README's Security section",
        )
    old = statedir.legacy_dir(settings.workspace, settings.state)
    if old is not None:
        yield Finding(
            "reach",
            Status.WARN,
            f"an old state folder {old} is still in the working tree: the next run moves it",
        )
    old_waits = statedir.legacy_wait_states(settings)
    if old_waits is not None:
        yield Finding(
            "reach",
            Status.WARN,
            f"wait states in {old_waits} (an older worker's default): the next run moves them "
            f"to {settings.wait_states}, or set wait_states_dir to keep them where they are",
        )


def check_database(context: Context) -> Iterable[Finding]:
    """SQLite's integrity check and WAL mode on the state database."""
    result = integrity.check_database(context.settings)
    where = context.settings.db_path
    if result["ok"]:
        yield Finding("database", Status.OK, f"the database {where}: {result['integrity']}")
    else:
        yield Finding(
            "database",
            Status.FAIL,
            f"the database {where}: integrity {result['integrity']}, journal mode "
            f"{result['journal_mode']}: restore it from a backup or move it aside",
        )


def check_inbox(context: Context) -> Iterable[Finding]:
    inbox = context.settings.inbox
    if not inbox.exists():
        yield Finding(
            "inbox", Status.WARN, f"no inbox folder at {inbox}: create it, or set inbox_dir"
        )
    elif not inbox.is_dir() or not os.access(inbox, os.R_OK | os.X_OK):
        yield Finding(
            "inbox", Status.FAIL, f"the inbox {inbox} is not a readable folder: fix it or inbox_dir"
        )
    else:
        yield Finding("inbox", Status.OK, f"the inbox {inbox} is readable")


def check_github(context: Context) -> Iterable[Finding]:
    github = context.settings.github
    if not github.repos:
        yield Finding("github", Status.OK, "no repositories configured: the GitHub source is off")
        return
    token = token_from_env(dict(context.env))
    if token is None:
        names = " or ".join(TOKEN_VARIABLES)
        yield Finding(
            "github", Status.FAIL, f"{len(github.repos)} repositories but no token: set {names}"
        )
        return
    client = make_client(github, None, token)
    try:
        user = client.request("GET", "/user", retry=False).data
        login = user.get("login") if isinstance(user, dict) else None
    except GitHubError as exc:
        yield Finding("github", Status.FAIL, f"the GitHub token does not work: {exc}")
        return
    yield Finding("github", Status.OK, f"the token works (user {login}) at {github.base_url}")
    for repo in github.repos:
        yield _repo_permission(client, repo, login)


def check_delivery(context: Context) -> Iterable[Finding]:
    """How each source's work is delivered, and whether it can be here (a worktree needs a
    git repository)."""
    settings = context.settings
    for source, line in zip(deliveries(settings), delivery_lines(settings), strict=True):
        problem = delivery_problem(settings, source, use_worktree=False)
        if problem is not None:
            yield Finding("delivery", Status.FAIL, problem)
        else:
            yield Finding("delivery", Status.OK, line)
    if settings.max_parallel > 1:
        yield from _alone(settings)


def _alone(settings: Settings) -> Iterable[Finding]:
    """Slots and in-place work: such a task waits for every other slot and runs alone."""
    setting = {"inbox": "inbox_delivery", "github": "[github] delivery"}
    for source, found in deliveries(settings).items():
        if found == IN_PLACE:
            yield Finding(
                "delivery",
                Status.WARN,
                f"max_parallel = {settings.max_parallel}, but {source}'s tasks are delivered in "
                "place: each waits for the other slots to end and runs alone. Set "
                f'{setting[source]} = "branch" to run them beside others (or `worker serve '
                "--use-worktree`)",
            )


def check_environment(context: Context) -> Iterable[Finding]:
    scheduled = schedule_env(context.env, context.settings)
    path = scheduled.variables.get("PATH", "")
    names = [name for name in scheduled.variables if name != "PATH"]
    carried = ", ".join(names) if names else "no WORKER_* variables"
    yield Finding(
        "environment",
        Status.OK if path else Status.FAIL,
        f"`worker schedule` writes PATH={path or '(unset)'} and {carried}",
    )
    relative = [part for part in path.split(os.pathsep) if part and not os.path.isabs(part)]
    if relative:
        yield Finding(
            "environment",
            Status.WARN,
            f"PATH has relative entries {relative}: a scheduled run resolves them elsewhere",
        )
    if scheduled.left_out:
        yield Finding(
            "environment",
            Status.WARN,
            f"{', '.join(scheduled.left_out)} left out of schedules (secrets): give them to the "
            "scheduled run through ~/.config/worker/env (systemd) or the crontab's environment",
        )


def check_schedules(context: Context) -> Iterable[Finding]:
    """A schedule installed on this machine (the user's crontab, systemd user units) that
    runs worker here must resolve the same state folder as this shell, or what `worker
    submit` queues here is never read by it, and `status` and `log` never see its runs."""
    settings = context.settings
    home = Path(context.env.get("HOME") or Path.home())
    for job in scheduled_jobs(context.env, home):
        if (home / job.workspace).resolve() != settings.workspace:  # relative: from HOME
            continue
        try:
            state, inbox = job_locations(job)
        except WorkerError as exc:
            yield Finding("schedule", Status.WARN, f"{job.where}: {exc}")
            continue
        if statedir.same(state, settings.state) and statedir.same(inbox, settings.inbox):
            yield Finding("schedule", Status.OK, f"{job.where} uses this state folder {state}")
            continue
        yield Finding(
            "schedule",
            Status.FAIL,
            f"{job.where} runs worker here with the state folder {state} (inbox {inbox}), not "
            f"this shell's {settings.state}: it never reads what `worker submit` queues here, "
            "and `worker status` and `log` never see its runs; replace it with what "
            f"`worker schedule {job.kind}` prints now (it pins WORKER_STATE_DIR)",
        )


def check_gemini(context: Context) -> Iterable[Finding]:
    if "gemini" not in context.agents():
        return
    found = gemini_setup.blockers(context.env, context.settings.workspace)
    for blocker in found:
        yield Finding("gemini", Status.FAIL if blocker.fatal else Status.WARN, blocker.message)
    if not found:
        yield Finding(
            "gemini", Status.OK, "auth is set; worker trusts the workspace with --skip-trust"
        )


def check_maintenance(context: Context) -> Iterable[Finding]:
    """How the daily maintenance runs the project's checks, and a set-up problem it met."""
    settings = context.settings
    plan = detect_plan(settings) if settings.fallback.enabled is not False else None
    said = policy(settings, plan)
    if not said.on or plan is None:
        yield Finding("maintenance", Status.OK, said.why)  # said once, not as a problem
        return
    if not plan.commands:
        yield Finding(
            "maintenance",
            Status.WARN,
            "no build or test command detected: set [fallback] test, or maintenance does nothing",
        )
        return
    commands = "; ".join(plan.commands)
    where = where_words(settings)
    yield Finding("maintenance", Status.OK, f"runs `{commands}` in {plan.environment}, {where}")
    problem = plan.problem or probe(plan.commands, settings)
    if problem:
        yield Finding(
            "maintenance",
            Status.WARN,
            f"its checks cannot run: {problem}; fix it or set [fallback] test (no agent "
            "is started for a set-up problem)",
        )
    known = load_problem(settings, None)
    if known is not None and known.problem != problem:
        yield Finding(
            "maintenance",
            Status.WARN,
            f"its last run could not run the checks: {known.problem}; no agent was started, "
            "and it tries again when the project or worker.toml changes, or after "
            f"{settings.fallback.interval_hours:g} h",
        )


def check_spend(context: Context) -> Iterable[Finding]:
    """What calls a model besides each task's own agent, and the caps on spend."""
    settings = context.settings
    yield Finding("spend", Status.OK, reviewers_line(settings.review))
    cap = settings.daily_cost_cap_usd
    words = f"${cap:.2f} a day" if cap else "no daily cap (daily_cost_cap_usd)"
    yield Finding(
        "spend", Status.OK, f"each task: at most ${settings.task_cost_cap_usd:.2f}; {words}"
    )


def check_notify(context: Context) -> Iterable[Finding]:
    """Every configured channel: its token here and in the scheduled runs, its chats."""
    for status, message in notify_checkup.describe(context.settings, context.env):
        yield Finding("notify", Status(status), message)


def check_heartbeat(context: Context) -> Iterable[Finding]:
    """With `[notify] heartbeat_url`: the last ping and how it went."""
    found = heartbeat.doctor_line(context.settings)
    if found is not None:
        yield Finding("heartbeat", Status.OK if found[0] else Status.WARN, found[1])


def check_sandbox(context: Context) -> Iterable[Finding]:
    """Which runtime will box the agents and what it enforces here (worker/sandbox/box.py)."""
    for status, message in sandbox_report.describe(context.settings):
        yield Finding("sandbox", Status(status), message)


CHECKS: list[tuple[str, Check]] = [
    ("config", check_config),
    ("modes", check_modes),
    ("agents", check_agents),
    ("state", check_state),
    ("reach", check_reach),
    ("database", check_database),
    ("inbox", check_inbox),
    ("github", check_github),
    ("delivery", check_delivery),
    ("environment", check_environment),
    ("schedule", check_schedules),
    ("gemini", check_gemini),
    ("maintenance", check_maintenance),
    ("spend", check_spend),
    ("notify", check_notify),
    ("heartbeat", check_heartbeat),
    ("sandbox", check_sandbox),
]


# -- helpers ----------------------------------------------------------------------------------
def _version_finding(agent: str, executable: str, setting: str, modes: str, cwd: Path) -> Finding:
    where = f"{cli_name(agent)} ({executable}, for {modes})"
    problem = executable_problem(executable)
    argv = [executable, "--version"]
    proc = None if problem else run_process(argv, cwd=cwd, timeout_s=_VERSION_TIMEOUT_S)
    if proc is None or proc.not_found:
        detail = problem or (proc.stderr_tail.strip() if proc else "")
        return Finding(
            "agents",
            Status.FAIL,
            f"{where} cannot be started: {detail}; set {setting} to its full path, or put it "
            "on the PATH `worker schedule` writes",
        )
    output = f"{proc.stdout}\n{proc.stderr_tail}"
    match = _VERSION.search(output)
    if proc.exit_code != 0 or match is None:
        detail = output.strip().splitlines()[-1][:200] if output.strip() else "no output"
        code = "timed out" if proc.timed_out else f"exit {proc.exit_code}"
        return Finding(
            "agents",
            Status.FAIL,
            f"{where}: `--version` gave no version ({code}: {detail}); set {setting} to the CLI",
        )
    version = match.group(0)
    tested = TESTED_VERSIONS.get(agent)
    if tested and f"{match.group(1)}.{match.group(2)}" != tested:
        return Finding(
            "agents",
            Status.WARN,
            f"{where} is {version}; worker is tested with {tested}.x: its output may differ",
        )
    return Finding("agents", Status.OK, f"{where} is {version}")


def _command_found(program: str, mode_id: str, env: Mapping[str, str]) -> Finding:
    found = shutil.which(program, path=env.get("PATH")) if program else None
    if found is None:
        return Finding(
            "agents",
            Status.FAIL,
            f"mode {mode_id!r}: its command {program!r} is not found on PATH: give its full path",
        )
    return Finding("agents", Status.OK, f"mode {mode_id!r}: its command is {found}")


def _repo_permission(client: GitHubClient, repo: str, login: str | None) -> Finding:
    try:
        data = client.request("GET", f"/repos/{repo}", retry=False).data
    except GitHubError as exc:
        return Finding(
            "github",
            Status.FAIL,
            f"{repo}: not readable with this token ({exc}): check the name and the token's access",
        )
    permissions = data.get("permissions") if isinstance(data, dict) else None
    granted = [name for name, on in (permissions or {}).items() if on]
    strongest = next((name for name in _STRONG_ENOUGH if name in granted), None)
    if strongest is None:
        return Finding(
            "github",
            Status.WARN,
            f"{repo}: {login} has {', '.join(granted) or 'no listed'} permission; worker labels "
            "issues and pushes branches, which needs push (write) access",
        )
    return Finding("github", Status.OK, f"{repo}: {login} has {strongest} permission")
