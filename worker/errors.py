"""The one family of errors written for the person at the terminal, and the exit codes."""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class ExitCode(IntEnum):
    """Exit codes of every command; documented in the README (sysexits where one fits)."""

    OK = 0  # done, idle or waiting
    TASK_FAILED = 1
    USAGE = 2
    LOCKED = 75  # EX_TEMPFAIL: another run holds the workspace lock; retry later
    DATA = 65  # EX_DATAERR: an input file is not in a format worker can read
    SOFTWARE = 70  # EX_SOFTWARE: an internal error (a bug in worker); the traceback is saved
    CONFIG = 78  # EX_CONFIG: fix the configuration; do not restart


class WorkerError(Exception):
    """An error whose message tells the user what went wrong and what to do next."""

    exit_code: ExitCode = ExitCode.TASK_FAILED


class ConfigError(WorkerError):
    """The configuration (worker.toml, WORKER_* variables, modes file) is invalid."""

    exit_code = ExitCode.CONFIG


class UsageError(WorkerError):
    """The command line asked for something that cannot be done."""

    exit_code = ExitCode.USAGE


class LockHeld(WorkerError):
    """Another run holds the workspace lock."""

    exit_code = ExitCode.LOCKED


class MalformedInput(WorkerError):
    """A file, message, API answer or agent output could not be read; names what was wrong."""


def describe_validation(exc: ValidationError, root: str = "(root)", limit: int = 5) -> str:
    """`key.path: problem; ...` for the first `limit` problems of a Pydantic error."""
    return "; ".join(
        f"{'.'.join(str(part) for part in err['loc']) or root}: {err['msg']}"
        for err in exc.errors()[:limit]
    )
