"""The project's own programs in the agent's box: the maintenance checks (a Makefile recipe,
`conftest.py`, npm scripts, the tree's `.venv/bin/python`), the checks that verify the agent's
work, and the interpreter `worker doctor` and a dry run ask. The agent may have written every
one of them, so they run where the agent runs: the same box (worker/sandbox/box.py), the same
environment (no tokens: secrets.agent_env), never with the operator's rights.

Where no box is chosen (`mode = "off"` for a trusted source, or `auto` on a machine without a
runtime) they run as before, and `where` says so in words.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from worker.config import Settings
from worker.errors import ConfigError
from worker.sandbox.box import Sandbox, find_runtime, unboxed_env

log = logging.getLogger(__name__)
# The box's policy for the project's programs: no agent CLI's session folder, no model host.
PROGRAMS = "project"


@dataclass(frozen=True)
class Place:
    """Where the project's programs run: the box, or none and why, in words."""

    box: Sandbox | None
    why: str = ""

    @property
    def words(self) -> str:
        if self.box is not None:
            return f"in the sandbox ({self.box.runtime.name})"
        return f"outside the sandbox: {self.why}"


def place(settings: Settings) -> Place:
    """The box the project's programs run in for these settings (the task's: a GitHub issue's
    get `untrusted_mode`); ConfigError where the box is required and missing."""
    runtime, why = find_runtime(settings.sandbox)
    if runtime is not None:
        return Place(Sandbox(settings, PROGRAMS, runtime))
    if settings.sandbox.mode == "required":
        raise ConfigError(f"the sandbox is required and the project's checks cannot run: {why}")
    return Place(None, why)


@contextlib.contextmanager
def boxed(
    where: Place, argv: list[str], cwd: Path, variables: dict[str, str] | None = None
) -> Iterator[tuple[list[str], dict[str, str]]]:
    """`argv` as it runs in `where` (the working tree writable, a private temporary folder),
    and its environment: the agent's, with `variables` added."""
    if where.box is None:
        log.info("%s runs %s", argv[0], where.words)
        yield argv, {**unboxed_env(), **(variables or {})}
        return
    with where.box.launch(argv, cwd) as (command, env):
        yield command, {**env, **(variables or {})}


def unstarted(exit_code: int | None, stderr: str) -> bool:
    """The runtime's words for a program it could not start: bubblewrap's own (exit 1), or
    the shell srt starts it with (exit 127)."""
    said = stderr.strip()
    if said.startswith("bwrap: execvp"):
        return True
    return exit_code == 127 and said.endswith(("No such file or directory", "command not found"))
