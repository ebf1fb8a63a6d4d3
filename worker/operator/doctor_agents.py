"""`worker doctor`'s checks of the agents: the modes load, each agent CLI they use starts and
says a version worker is tested with (or a mode's own command is found), Gemini's set-up.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from worker.agents import gemini_setup
from worker.agents.infra import cli_name, executable_problem
from worker.errors import ConfigError
from worker.operator.doctor_findings import Context, Finding, Status
from worker.process.proc import run_process
from worker.sandbox.box import session_dirs
from worker.sandbox.hosts import box_files

# The versions the conformance tests drive (tests/realcli/package.json): another major.minor
# may print a stream worker has not been checked against.
TESTED_VERSIONS = {"claude": "2.1", "codex": "0.169", "gemini": "0.61"}
_VERSION_TIMEOUT_S = 30.0  # `--version` answers at once; one that hangs is a finding
_VERSION = re.compile(r"\b(\d+)\.(\d+)\.(\d+)")


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
        yield from _box_files(agent, context.env)


def _box_files(agent: str, env: Mapping[str, str]) -> Iterable[Finding]:
    """A file the box keeps read-only (Codex's config.toml) that is not a regular file refuses
    every box of that agent (the run's preflight says so too, exit 78): said here first."""
    home = Path(env.get("HOME") or Path.home())
    try:
        box_files(agent, session_dirs(agent, env, home, create=False), create=False)
    except ConfigError as exc:
        yield Finding("agents", Status.FAIL, str(exc))


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
