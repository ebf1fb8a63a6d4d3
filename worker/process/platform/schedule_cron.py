"""The crontab lines of `worker schedule cron`."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from worker.errors import ConfigError
from worker.process.platform.cron_interval import Refusal, cron_times, human_s
from worker.process.platform.schedule_environment import ScheduleEnv
from worker.process.platform.schedule_kinds import Target, command_argv

if TYPE_CHECKING:  # pydantic is not needed to print `worker --help`
    from worker.config import Settings


# -- cron -------------------------------------------------------------------------------------
def cron_files(target: Target, settings: Settings, python: str, env: ScheduleEnv) -> dict[str, str]:
    assignments = "".join(f"{name}={shlex.quote(value)} " for name, value in env.variables.items())

    def line(when: str) -> str:
        logs = settings.logs
        command = (
            f"cd {shlex.quote(str(settings.workspace))} && mkdir -p {shlex.quote(str(logs))}"
            f" && {assignments}{shlex.join(command_argv(target, settings, python))}"
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
