"""What `worker schedule` writes: the kinds of scheduler, the command scheduled (`worker run`
or `worker supervise`), a schedule's files, and the command line and name every kind uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pydantic is not needed to print `worker --help`
    from worker.config import Settings


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


def workspace_slug(workspace: Path) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", workspace.name).strip("-.") or "workspace"


def command_argv(target: Target, settings: Settings, python: str) -> list[str]:
    return [python, "-m", "worker", target.value, "--workspace", str(settings.workspace)]
