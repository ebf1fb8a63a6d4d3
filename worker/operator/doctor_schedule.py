"""`worker doctor`'s checks of the scheduled runs: the environment `worker schedule` writes, and
whether a schedule installed here uses this shell's state folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from worker.errors import WorkerError
from worker.operator.doctor_findings import Context, Finding, Status
from worker.process.platform.installed import job_locations, scheduled_jobs
from worker.process.platform.schedule import schedule_env
from worker.state import statedir


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
