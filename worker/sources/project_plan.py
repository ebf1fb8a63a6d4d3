"""A check plan: where the project's checks run (in words), the commands, a set-up problem
found before running anything, and the fingerprint that changes when any of it may have.

project_checks.py re-exports `CheckPlan`; project_detect.py makes one for a workspace.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

PYTHON_MARKERS = (
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "tox.ini",
    "noxfile.py",
    "pytest.ini",
    "requirements.txt",
)
MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
# What the fingerprint watches besides the commands: a change to any of these may fix a
# set-up problem, so the remembered one is tried again at the next run.
_WATCHED = (
    *PYTHON_MARKERS,
    *MAKEFILES,
    "uv.lock",
    "poetry.lock",
    "hatch.toml",
    "package.json",
    "package-lock.json",
    "node_modules",
    "Cargo.toml",
    "go.mod",
    ".venv",
    ".venv/pyvenv.cfg",
    "venv",
    "venv/pyvenv.cfg",
)


@dataclass(frozen=True)
class CheckPlan:
    """The checks maintenance runs: where (in words), what, and why they cannot run."""

    environment: str
    commands: list[str]
    problem: str | None = None  # found before running anything: no command needs to run
    own_env: bool = True  # False: no environment of the project's own was found

    def fingerprint(self, workspace: Path) -> str:
        """Changes when anything that decides how the checks run changes: the commands, the
        project's markers, its environment's installed packages, the tools on PATH."""
        watched = [*_WATCHED, *_site_packages(workspace)]
        stats = {name: _stat(workspace / name) for name in watched}
        tools = {tool: shutil.which(tool) for tool in sorted(_tools(self.commands))}
        data = [self.environment, self.commands, self.problem, stats, tools]
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _tools(commands: list[str]) -> set[str]:
    found = {"python", "python3"}
    for command in commands:
        words = command.split()
        if words and os.sep not in words[0]:
            found.add(words[0])
    return found


def _site_packages(workspace: Path) -> list[str]:
    """The environments' package folders: installing a package changes their time."""
    found = []
    for name in (".venv", "venv"):
        for pattern in ("lib/python*/site-packages", "Lib/site-packages"):
            found += [p.relative_to(workspace).as_posix() for p in (workspace / name).glob(pattern)]
    return found


def _stat(path: Path) -> list[int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return [info.st_mtime_ns, info.st_size]
