"""The user units of `worker schedule systemd`: a service (and a timer for `worker run`) whose
start limit and restart delays come from the `[daemon]` settings.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from worker.process.platform.schedule_environment import ScheduleEnv
from worker.process.platform.schedule_kinds import Target, command_argv, workspace_slug

if TYPE_CHECKING:  # pydantic is not needed to print `worker --help`
    from worker.config import Settings


# -- systemd (user units: no root needed) ----------------------------------------------------
def systemd_files(
    target: Target, settings: Settings, python: str, env: ScheduleEnv
) -> dict[str, str]:
    d = settings.daemon
    name = f"worker-{target.value}-{workspace_slug(settings.workspace)}"
    ws = str(settings.workspace)
    exec_start = " ".join(_systemd_quote(part) for part in command_argv(target, settings, python))
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
