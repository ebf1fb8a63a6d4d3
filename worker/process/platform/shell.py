"""The platform's shell for command lines from the configuration (build and test commands).

POSIX: `/bin/sh -c COMMAND`. Windows: `cmd.exe` (COMSPEC), as `shell=True` uses and as npm runs
its scripts. A command line cannot be handed to cmd.exe inside an argument list: Python quotes
list arguments for the C runtime (`\\"`), which cmd.exe does not read, so a command holding
quotes (`pytest -k "a and b"`) would arrive mangled. The command travels in an environment
variable instead, and cmd.exe expands it before it parses the line, exactly as if it had been
typed (`%WORKER_SHELL_COMMAND%`; `/d` skips AutoRun commands from the registry).
"""

from __future__ import annotations

import os

from worker.process.platform.process import windows

COMMAND_VARIABLE = "WORKER_SHELL_COMMAND"


def shell_command(command: str) -> tuple[list[str], dict[str, str]]:
    """The argv that runs `command` through the platform's shell, and the environment variables
    it needs on top of the usual ones."""
    if windows():
        shell = os.environ.get("COMSPEC") or "cmd.exe"
        return [shell, "/d", "/c", f"%{COMMAND_VARIABLE}%"], {COMMAND_VARIABLE: command}
    return ["/bin/sh", "-c", command], {}
