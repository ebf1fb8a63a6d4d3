"""What `worker doctor`'s checks read and say: the `Context` (the settings and the environment a
scheduled run will have), a `Finding` (ok / warn / fail, with a message that says what to fix),
a `Check`, and the `DoctorReport` with its exit code.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any

from worker.config import Settings
from worker.errors import ExitCode, WorkerError
from worker.modes import Mode, ModeSet, load_modes, modes_path


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
