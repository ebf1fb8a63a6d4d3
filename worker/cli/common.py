"""Options shared by every command, the one way a command gets its settings, and fewer
garbage collections while the program starts."""

from __future__ import annotations

import gc
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from worker.errors import ConfigError

if TYPE_CHECKING:
    from worker.config import Settings

WorkspaceOpt = Annotated[
    Path,
    typer.Option(
        "--workspace",
        "-w",
        envvar="WORKER_WORKSPACE",
        file_okay=False,
        help="The workspace folder (default: the current folder).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")]

# The root's options that may also come after the command (`worker run -v --dry-run`), as in
# pip and httpie: the flags, and the options with their value.
_GLOBAL_FLAGS = {"-v", "--verbose", "-q", "--quiet"}
_GLOBAL_VALUED = ("--log-level", "--config")
COMPLETE_VAR = "_WORKER_COMPLETE"  # how the shell asks worker what to complete


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def lift_global_options(args: list[str]) -> tuple[list[str], list[str]]:
    """`args` split into the root's options, wherever they are before `--`, and the rest in
    its order: `run -v --dry-run` -> (["-v"], ["run", "--dry-run"])."""
    lifted: list[str] = []
    rest: list[str] = []
    tokens = iter(args)
    for token in tokens:
        if token == "--":
            rest += [token, *tokens]
        elif token in _GLOBAL_FLAGS or token.startswith(tuple(f"{o}=" for o in _GLOBAL_VALUED)):
            lifted.append(token)
        elif token in _GLOBAL_VALUED:
            lifted += [token, *(value for value in [next(tokens, None)] if value is not None)]
        else:
            rest.append(token)
    return lifted, rest


def log_level(verbose: bool, quiet: bool, option: LogLevel | None, env: str | None) -> LogLevel:
    """worker's own diagnostics: `--log-level` > `-v`/`--quiet` > WORKER_LOG_LEVEL > warning."""
    if option:
        return option
    if verbose or quiet:
        return LogLevel.DEBUG if verbose else LogLevel.ERROR
    if not env:
        return LogLevel.WARNING
    try:
        return LogLevel(env.lower())
    except ValueError:
        names = ", ".join(LogLevel)
        raise ConfigError(f"WORKER_LOG_LEVEL={env!r} is no log level; use one of {names}") from None


def settings_for(workspace: Path, *, lenient: bool = False, warn: bool = True) -> Settings:
    """Load the workspace's settings; a ConfigError reaches main() and exits 78. `lenient`:
    the commands that report (doctor, status, log, inspect, queue, costs, why) get settings
    whatever is wrong, each problem left out and printed here as a warning (unless `warn` is
    False: doctor reports them itself), so nothing locks a person out of finding what to fix.
    A warning (a variable that is no setting) is printed for every command."""
    from worker.cli import ui  # nor logging, which ui loads
    from worker.config import load_settings  # pydantic is not needed for `--help`

    settings = load_settings(workspace, lenient=lenient)
    for problem in settings.problems if warn else ():
        stops = " (`worker run` stops on it)" if problem.fatal else ""
        ui.warn(f"{problem}{stops}")
    _collect_as_usual()  # the command has its modules and settings: they live as long as it
    return settings


# Python's cycle collector runs after every 700 new container objects. Starting a command
# builds thousands of classes, pydantic schemas and validators, all kept until the process
# ends: the collector ran about seventy times during a dry run's imports (some 9 ms) and found
# nothing, and a later full collection walked all of them again (15 ms of an idle run at
# 10,000 messages and 1,000 waits). So the program (`main`; never a program importing worker,
# nor the tests) collects rarely until the command has its modules and settings, then moves
# what exists into the collector's permanent generation (`gc.freeze`) and collects as
# before: later collections walk only the run's own objects. This is the pattern Python's
# documentation gives for `gc.freeze`. Rarely, not never: more new objects than a dry run's
# imports make (about 46,000), so a command that loads no settings still collects.
_STARTING_THRESHOLD = 100_000
_usual_thresholds: list[tuple[int, int, int]] = []


def collect_rarely() -> None:
    """Collect rarely until the command has its settings (see above)."""
    if not _usual_thresholds:
        _usual_thresholds.append(gc.get_threshold())
        gc.set_threshold(_STARTING_THRESHOLD, *_usual_thresholds[0][1:])


def _collect_as_usual() -> None:
    if _usual_thresholds:
        gc.freeze()
        gc.set_threshold(*_usual_thresholds.pop())
