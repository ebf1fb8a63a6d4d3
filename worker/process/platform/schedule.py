"""`worker schedule`: ready-to-install cron, systemd and Task Scheduler definitions. Pure text.

The numbers come from the `[daemon]` settings so the outer scheduler agrees with the inner one
(see worker/daemon/settings.py): systemd's start limit is the crash-loop
window and count, which must exceed the backoff sum or it never trips (the 5-in-10 s pitfall);
exit 75 (EX_TEMPFAIL: another run holds the lock) is a success, exit 78 (EX_CONFIG) is never
restarted; one run at a time, missed runs coalesce (flock, Task Scheduler IgnoreNew).

Here `render`; each kind's files are written by its own module beside this one
(schedule_cron, schedule_systemd, schedule_windows), what the run sees by schedule_environment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worker.process.platform.schedule_cron import cron_files
from worker.process.platform.schedule_environment import ScheduleEnv, needed_secrets, schedule_env
from worker.process.platform.schedule_kinds import Kind, Schedule, Target
from worker.process.platform.schedule_systemd import systemd_files
from worker.process.platform.schedule_windows import escape, windows_files

__all__ = [
    "Kind",
    "Schedule",
    "ScheduleEnv",
    "Target",
    "escape",
    "needed_secrets",
    "render",
    "schedule_env",
]

if TYPE_CHECKING:  # pydantic is not needed to print `worker --help`
    from worker.config import Settings


def render(
    kind: Kind,
    target: Target,
    settings: Settings,
    python: str,
    env: ScheduleEnv | None = None,
) -> Schedule:
    renderer = {Kind.CRON: cron_files, Kind.SYSTEMD: systemd_files, Kind.WINDOWS: windows_files}[
        kind
    ]
    return Schedule(kind, target, renderer(target, settings, python, env or ScheduleEnv()))
