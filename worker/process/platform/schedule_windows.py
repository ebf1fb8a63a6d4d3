"""The Task Scheduler XML of `worker schedule windows`, escaped without `xml.sax`."""

from __future__ import annotations

import math
import subprocess
from typing import TYPE_CHECKING

from worker.process.platform.schedule_environment import ScheduleEnv
from worker.process.platform.schedule_kinds import Target, command_argv, workspace_slug

if TYPE_CHECKING:  # pydantic is not needed to print `worker --help`
    from worker.config import Settings


def escape(text: str) -> str:
    """Text for an XML element or comment: `xml.sax.saxutils.escape`'s three replacements,
    without the import (it pulls in urllib, http, ssl and email on every command)."""
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


# -- Windows Task Scheduler --------------------------------------------------------------------
def windows_files(
    target: Target, settings: Settings, python: str, env: ScheduleEnv
) -> dict[str, str]:
    d = settings.daemon
    ws = str(settings.workspace)
    command = python
    args = subprocess.list2cmdline(
        command_argv(target, settings, python)[1:]
    )  # the C runtime's rules
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
    return {f"worker-{target.value}-{workspace_slug(settings.workspace)}.xml": xml}


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
