"""`worker schedule`: ready-to-install cron, systemd and Task Scheduler definitions. Pure text.

The numbers come from the `[daemon]` settings so the outer scheduler agrees with the inner one
(see worker/daemon/settings.py): systemd's start limit is the crash-loop
window and count, which must exceed the backoff sum or it never trips (the 5-in-10 s pitfall);
exit 75 (EX_TEMPFAIL: another run holds the lock) is a success, exit 78 (EX_CONFIG) is never
restarted; one run at a time, missed runs coalesce (flock, Task Scheduler IgnoreNew).
"""

from __future__ import annotations

import math
import re
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from worker import secrets
from worker.delivery import delivery_lines
from worker.errors import ConfigError
from worker.process.platform.cron_interval import Refusal, cron_times, human_s

if TYPE_CHECKING:  # pydantic is not needed to print `worker --help`
    from worker.config import Settings


def escape(text: str) -> str:
    """Text for an XML element or comment: `xml.sax.saxutils.escape`'s three replacements,
    without the import (it pulls in urllib, http, ssl and email on every command)."""
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


class Kind(StrEnum):
    CRON = "cron"
    SYSTEMD = "systemd"
    WINDOWS = "windows"


class Target(StrEnum):
    RUN = "run"
    SUPERVISE = "supervise"


@dataclass(frozen=True)
class Schedule:
    kind: Kind
    target: Target
    files: dict[str, str]  # file name -> content; cron has one pseudo-file, "crontab"


@dataclass(frozen=True)
class ScheduleEnv:
    """What a scheduled run sees: the user's PATH (cron's own is /usr/bin:/bin, where agent
    CLIs installed by npm are not), the WORKER_* variables set now, less the secrets, and the
    state folder this shell resolved (`WORKER_STATE_DIR`): cron, systemd and Task Scheduler
    start with another environment (no `XDG_STATE_HOME`, another `HOME` or `LOCALAPPDATA`),
    where the default would be another folder, with another inbox and database."""

    variables: dict[str, str] = field(default_factory=dict)
    left_out: tuple[str, ...] = ()  # names of secrets not written
    state: str | None = None  # the state folder, when pinned here
    inbox: str | None = None  # its inbox
    needed: tuple[str, ...] = ()  # the secrets the configuration needs, each with what for
    delivery: tuple[str, ...] = ()  # how each source's work is delivered (worker/delivery.py)

    def comment(self, prefix: str = "#") -> list[str]:
        lines = []
        if self.state is not None:
            lines.append(
                f"{prefix} State folder {self.state} (inbox {self.inbox}), pinned with "
                "WORKER_STATE_DIR: the same as `worker submit`, `status` and `log` in this shell."
            )
        lines += [f"{prefix} Delivery of {line}" for line in self.delivery]
        if self.variables:
            lines.append(
                f"{prefix} Environment: the PATH and WORKER_* variables `worker schedule` ran "
                "with, never a secret."
            )
        if self.needed:
            lines.append(
                f"{prefix} Secrets this configuration needs in the run's environment (never in "
                f"worker.toml): {'; '.join(self.needed)}"
            )
        if self.left_out:
            lines.append(
                f"{prefix} Left out as secrets (set them where the run's environment comes from):"
                f" {', '.join(self.left_out)}"
            )
        return lines


def schedule_env(env: Mapping[str, str], settings: Settings | None = None) -> ScheduleEnv:
    """The variables to write; with `settings`, the state folder they resolved is pinned
    unless a setting already names it (worker.toml's `state_dir`, read by the run too, or
    `WORKER_STATE_DIR`, written with the others)."""
    variables: dict[str, str] = {}
    left_out: list[str] = []
    if env.get("PATH"):
        variables["PATH"] = env["PATH"]
    for name in sorted(env):
        if not name.startswith("WORKER_"):
            continue
        # A crontab, a unit file and a task XML are readable files: a secret (by its name, or a
        # URL with a password in it) stays in the environment file or the profile.
        if secrets.is_secret_name(name) or secrets.has_url_password(env[name]):
            left_out.append(name)
        else:
            variables[name] = env[name]
    if settings is None:
        return ScheduleEnv(variables, tuple(left_out))
    if settings.state_dir is None:
        variables["WORKER_STATE_DIR"] = str(settings.state)
    return ScheduleEnv(
        variables,
        tuple(left_out),
        str(settings.state),
        str(settings.inbox),
        needed_secrets(settings),
        tuple(delivery_lines(settings)),
    )


# The variable each agent CLI reads its API key from (worker/agents/*: KEY_SETTING).
_AGENT_KEYS = {"claude": "ANTHROPIC_API_KEY", "codex": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"}


def needed_secrets(settings: Settings) -> tuple[str, ...]:
    """Every secret the configuration needs from a scheduled run's environment, each with what
    it is for: a run started by cron without one is never notified, or never reaches GitHub."""
    # Here, not at the top: `worker --help` must not load the modes or the notify settings.
    from worker.modes import load_modes, modes_path
    from worker.operator.notify.settings import telegram_configured

    needed = []
    if settings.github.repos:
        needed.append("WORKER_GITHUB_TOKEN (or GITHUB_TOKEN: the GitHub source)")
    if telegram_configured(settings.notify):
        needed.append(f"{settings.notify.telegram.token_env} (the Telegram bot's token)")
    try:
        modes = load_modes(modes_path(settings.workspace, settings.modes_file)).modes.values()
        agents = sorted({mode.agent for mode in modes if mode.agent in _AGENT_KEYS})
    except Exception:  # a broken modes file is doctor's to say; the usual agent then
        agents = ["claude"]
    keys = " or ".join(_AGENT_KEYS[agent] for agent in agents)
    if keys:
        needed.append(f"{keys} (the agent's API key, unless its CLI is logged in)")
    return tuple(needed)


def render(
    kind: Kind,
    target: Target,
    settings: Settings,
    python: str,
    env: ScheduleEnv | None = None,
) -> Schedule:
    renderer = {Kind.CRON: _cron, Kind.SYSTEMD: _systemd, Kind.WINDOWS: _windows}[kind]
    return Schedule(kind, target, renderer(target, settings, python, env or ScheduleEnv()))


def _slug(workspace: Path) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", workspace.name).strip("-.") or "workspace"


def _argv(target: Target, settings: Settings, python: str) -> list[str]:
    return [python, "-m", "worker", target.value, "--workspace", str(settings.workspace)]


# -- cron -------------------------------------------------------------------------------------
def _cron(target: Target, settings: Settings, python: str, env: ScheduleEnv) -> dict[str, str]:
    assignments = "".join(f"{name}={shlex.quote(value)} " for name, value in env.variables.items())

    def line(when: str) -> str:
        logs = settings.logs
        command = (
            f"cd {shlex.quote(str(settings.workspace))} && mkdir -p {shlex.quote(str(logs))}"
            f" && {assignments}{shlex.join(_argv(target, settings, python))}"
            f" >> {shlex.quote(str(logs / f'cron-{target.value}.log'))} 2>&1"
        )
        return f"{when} {command.replace('%', chr(92) + '%')}"  # cron reads % as a newline

    head = [
        f"# worker {target.value} for {settings.workspace} (install: crontab -e, paste below)",
        "# Secrets go in the crontab's environment lines (NAME=value above this line) or the",
        "# user's profile, never in worker.toml.",
        *env.comment(),
    ]
    if target is Target.RUN:
        times = cron_times(settings.daemon.interval_s)
        if isinstance(times, Refusal):
            raise ConfigError(times.message())
        head.append(
            f"# Every {human_s(settings.daemon.interval_s)}"
            + (
                f" ({len(times)} lines, one per minute of the hour it fires at)."
                if len(times) > 1
                else "."
            )
            + " A run that finds the lock held exits 75 at once: overlapping ticks coalesce."
        )
        return {"crontab": "\n".join([*head, *map(line, times)]) + "\n"}
    head.append("# Started at boot; the 5-minute line is a watchdog: while a supervisor holds")
    head.append("# the workspace's lock, another one exits 75 at once.")
    return {"crontab": "\n".join([*head, line("@reboot"), line("*/5 * * * *")]) + "\n"}


# -- systemd (user units: no root needed) ----------------------------------------------------
def _systemd(target: Target, settings: Settings, python: str, env: ScheduleEnv) -> dict[str, str]:
    d = settings.daemon
    name = f"worker-{target.value}-{_slug(settings.workspace)}"
    ws = str(settings.workspace)
    exec_start = " ".join(_systemd_quote(part) for part in _argv(target, settings, python))
    unit = [
        f"# {name}.service: install in ~/.config/systemd/user/, then",
        "#   systemctl --user daemon-reload && systemctl --user enable --now "
        + (f"{name}.timer" if target is Target.RUN else f"{name}.service"),
        "[Unit]",
        f"Description=worker {target.value} for {ws}",
        "# The start limit is the crash-loop rule: its window exceeds the backoff sum.",
        f"StartLimitIntervalSec={math.ceil(d.crash_loop_window_s)}",
        f"StartLimitBurst={d.crash_loop_count}",
        "",
        "[Service]",
        "Type=oneshot" if target is Target.RUN else "Type=simple",
        f"WorkingDirectory={_systemd_quote(ws)}",
        f"ExecStart={exec_start}",
        *env.comment(),
        *(
            "Environment=" + _systemd_quote(f"{name}={value}", always=True)
            for name, value in env.variables.items()
        ),
        "# Secrets come from the environment only: KEY=value lines in this file"
        + (f" ({', '.join(n.split(' ', 1)[0] for n in env.needed)})." if env.needed else "."),
        "EnvironmentFile=-%h/.config/worker/env",
        "Restart=on-failure",
        "# 1 s doubling to the cap (RestartSteps/RestartMaxDelaySec need systemd 254+).",
        f"RestartSec={_seconds(d.backoff_base_s)}",
        f"RestartSteps={_steps(d.backoff_base_s, d.backoff_cap_s)}",
        f"RestartMaxDelaySec={_seconds(d.backoff_cap_s)}",
        "# 75: another run holds the lock (retry later); 78: configuration error, do not restart.",
        "SuccessExitStatus=75",
        "RestartPreventExitStatus=78",
        "# SIGTERM to worker only; it stops its agents and releases the task within the grace.",
        "KillMode=mixed",
        f"TimeoutStopSec={math.ceil(d.stop_grace_s) + 15}",
        "NoNewPrivileges=yes",
    ]
    if target is Target.SUPERVISE:
        unit += ["", "[Install]", "WantedBy=default.target"]
        return {f"{name}.service": "\n".join(unit) + "\n"}
    timer = [
        f"# {name}.timer: one run every {d.interval_s:g} s, counted from the start of the last",
        "# one; a tick while a run is still going starts none (runs never overlap).",
        "[Unit]",
        f"Description=worker run every {d.interval_s:g} s for {ws}",
        "",
        "[Timer]",
        "OnBootSec=2min",
        f"OnUnitActiveSec={_seconds(d.interval_s)}",
        "AccuracySec=10s",
        "",
        "[Install]",
        "WantedBy=timers.target",
    ]
    return {f"{name}.service": "\n".join(unit) + "\n", f"{name}.timer": "\n".join(timer) + "\n"}


def _systemd_quote(part: str, always: bool = False) -> str:
    part = part.replace("%", "%%")  # systemd expands % specifiers
    if not always and re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", part):
        return part
    return '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _seconds(value: float) -> str:
    return f"{value:g}s"


def _steps(base: float, cap: float) -> int:
    return max(1, math.ceil(math.log2(cap / base))) if cap > base else 1


# -- Windows Task Scheduler --------------------------------------------------------------------
def _windows(target: Target, settings: Settings, python: str, env: ScheduleEnv) -> dict[str, str]:
    d = settings.daemon
    ws = str(settings.workspace)
    command = python
    args = subprocess.list2cmdline(_argv(target, settings, python)[1:])  # the C runtime's rules
    if env.variables:
        # Task Scheduler's Exec action has no environment of its own: cmd.exe sets it first.
        sets = "".join(f'set "{name}={value}"&& ' for name, value in env.variables.items())
        command, args = "cmd.exe", f"/d /c {sets}{subprocess.list2cmdline([python])} {args}"
    notes = "".join("\n     " + line.lstrip("# ") for line in env.comment())
    if target is Target.RUN:
        trigger = (
            "    <TimeTrigger>\n"
            "      <Repetition>\n"
            f"        <Interval>{_iso(max(60.0, d.interval_s))}</Interval>\n"
            "        <StopAtDurationEnd>false</StopAtDurationEnd>\n"
            "      </Repetition>\n"
            "      <StartBoundary>2025-01-01T00:00:00</StartBoundary>\n"
            "      <Enabled>true</Enabled>\n"
            "    </TimeTrigger>\n"
        )
        limit = _iso(settings.task_wall_clock_s + 600)  # one task's wall clock, plus cleanup
    else:
        trigger = "    <LogonTrigger>\n      <Enabled>true</Enabled>\n    </LogonTrigger>\n"
        limit = "PT0S"  # no limit: it is meant to run for ever
    xml = f"""<?xml version="1.0" encoding="UTF-16"?>
<!-- worker {target.value} for {escape(ws)}. Install: save as UTF-16 (PowerShell's > does),
     then: schtasks /Create /TN "worker {target.value}" /XML task.xml{escape(notes)} -->
<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">
  <RegistrationInfo>
    <Description>worker {target.value} for {escape(ws)}</Description>
  </RegistrationInfo>
  <Triggers>
{trigger}  </Triggers>
  <Principals>
    <Principal id="Author">
      <LogonType>InteractiveToken</LogonType>
      <RunLevel>LeastPrivilege</RunLevel>
    </Principal>
  </Principals>
  <Settings>
    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>
    <StartWhenAvailable>true</StartWhenAvailable>
    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>
    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>
    <AllowStartOnDemand>true</AllowStartOnDemand>
    <Enabled>true</Enabled>
    <ExecutionTimeLimit>{limit}</ExecutionTimeLimit>
    <RestartOnFailure>
      <Interval>PT1M</Interval>
      <Count>{d.crash_loop_count}</Count>
    </RestartOnFailure>
  </Settings>
  <Actions Context="Author">
    <Exec>
      <Command>{escape(command)}</Command>
      <Arguments>{escape(args)}</Arguments>
      <WorkingDirectory>{escape(ws)}</WorkingDirectory>
    </Exec>
  </Actions>
</Task>
"""
    return {f"worker-{target.value}-{_slug(settings.workspace)}.xml": xml}


def _iso(seconds: float) -> str:
    """An xs:duration Task Scheduler accepts: PT1H30M, PT5M, PT45S."""
    total = max(1, math.ceil(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{hours}H" if hours else "",
        f"{minutes}M" if minutes else "",
        f"{secs}S" if secs else "",
    ]
    return "PT" + "".join(parts)
