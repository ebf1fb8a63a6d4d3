"""Schedules installed on this machine that run worker, and the state folder each would use.

`worker doctor` reads what it can: the user's crontab (`crontab -l`) and the systemd user
units in `~/.config/systemd/user/`. For each job that runs worker it rebuilds the environment
the scheduler gives it, as far as the files say: cron gives `HOME` (from the user database)
and the crontab's own `NAME=value` lines; the systemd user manager gives `HOME`, then the
unit's `Environment=` lines and its `EnvironmentFile=`; then the job's own assignments. Neither
passes `XDG_STATE_HOME` from a login shell, which is how a schedule printed by an older
worker came to use another state folder than the user's shell.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from worker.config import load_settings
from worker.process.proc import run_process
from worker.state.statedir import default_state_dir

_CRONTAB_TIMEOUT_S = 10.0
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_COMMANDS = ("run", "serve", "supervise")  # what a schedule starts


@dataclass(frozen=True)
class Job:
    """One scheduled start of worker."""

    where: str  # "crontab line 3", or the unit file
    kind: str  # cron or systemd: what `worker schedule` prints for it
    workspace: Path  # its --workspace, else its working folder
    env: dict[str, str] = field(default_factory=dict)  # what the run starts with


def scheduled_jobs(env: Mapping[str, str], home: Path) -> list[Job]:
    """The jobs of the user's crontab and systemd user units that run worker."""
    return [*_crontab_jobs(env, home), *_systemd_jobs(home)]


def _crontab_jobs(env: Mapping[str, str], home: Path) -> Iterator[Job]:
    proc = run_process(
        ["crontab", "-l"],
        cwd=home if home.is_dir() else Path("/"),
        timeout_s=_CRONTAB_TIMEOUT_S,
        env={"PATH": env.get("PATH", os.defpath)},
    )
    if proc.exit_code != 0:  # no crontab program, or no crontab for this user
        return
    yield from crontab_jobs(proc.stdout, home)


def crontab_jobs(text: str, home: Path) -> Iterator[Job]:
    """The jobs of a crontab's text that run worker."""
    base = {"HOME": str(home)}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if _ASSIGNMENT.match(line) and " " not in line.split("=", 1)[0]:
            name, value = line.split("=", 1)
            base[name.strip()] = value.strip().strip("'\"")
            continue
        fields = line.split(None, 1 if line.startswith("@") else 5)
        command = fields[-1].replace("\\%", "%")  # cron reads an unescaped % as a newline
        job = _job(command, f"crontab line {number}", "cron", base, None)
        if job is not None:
            yield job


def _systemd_jobs(home: Path) -> Iterator[Job]:
    folder = home / ".config" / "systemd" / "user"
    for unit in sorted(folder.glob("*.service")) if folder.is_dir() else ():
        try:
            text = unit.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        job = systemd_job(text, str(unit), home)
        if job is not None:
            yield job


def systemd_job(text: str, where: str, home: Path) -> Job | None:
    """The job of a systemd unit's text, when it runs worker."""
    values: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith(("#", ";")):
            values.setdefault(key.strip(), []).append(value.strip().replace("%h", str(home)))
    env = {"HOME": str(home)}
    for line in values.get("Environment", []):
        for item in shlex.split(line.replace("%%", "%")):
            name, _, value = item.partition("=")
            env[name] = value
    for line in values.get("EnvironmentFile", []):
        env.update(_environment_file(Path(line.lstrip("-"))))
    cwd = values.get("WorkingDirectory", [None])[-1]
    exec_start = values.get("ExecStart", [""])[-1].replace("%%", "%")
    return _job(exec_start, where, "systemd", env, Path(cwd.strip('"')) if cwd else None)


def _environment_file(path: Path) -> dict[str, str]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    found = {}
    for line in lines:
        name, sep, value = line.strip().partition("=")
        if sep and not name.startswith("#"):
            found[name.strip()] = value.strip().strip("'\"")
    return found


def _job(
    command: str, where: str, kind: str, base: Mapping[str, str], cwd: Path | None
) -> Job | None:
    """The job when `command` starts worker: its workspace and environment."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    env = dict(base)
    for index, word in enumerate(words):
        if word in ("&&", ";", "||"):
            env = dict(base)  # assignments hold for their own command only
        elif word == "cd" and index + 1 < len(words):
            cwd = Path(words[index + 1])
        elif _ASSIGNMENT.match(word):
            name, _, value = word.partition("=")
            env[name] = value
        elif _starts_worker(words, index):
            workspace = _option(words[index:], "--workspace", "-w") or env.get("WORKER_WORKSPACE")
            folder = Path(workspace) if workspace else cwd
            return None if folder is None else Job(where, kind, folder, env)
        else:
            env = dict(base) if not word.startswith("-") else env
    return None


def _starts_worker(words: list[str], index: int) -> bool:
    """`python -m worker run ...` or `.../worker run ...`."""
    word, rest = words[index], words[index + 1 :]
    if rest[:2] == ["-m", "worker"]:
        return len(rest) > 2 and rest[2] in _COMMANDS
    return Path(word).name in ("worker", "worker.exe") and bool(rest) and rest[0] in _COMMANDS


def _option(words: list[str], *names: str) -> str | None:
    for index, word in enumerate(words):
        if word in names and index + 1 < len(words):
            return words[index + 1]
        for name in names:
            if word.startswith(name + "="):
                return word[len(name) + 1 :]
    return None


def job_locations(job: Job) -> tuple[Path, Path]:
    """The state folder and inbox the job's run resolves, from its environment (ConfigError
    when its workspace is no folder)."""
    settings = load_settings(job.workspace, env=job.env, lenient=True)
    state = settings.state
    if settings.state_dir is None:  # the default: from the job's XDG_STATE_HOME or HOME
        state = default_state_dir(settings.workspace, job.env)
    inbox = settings.inbox if settings.inbox_dir is not None else state / "inbox"
    return state, inbox
