"""The agent CLI's folder per trust level. Claude Code, Codex and Gemini CLI load settings,
hooks, memory (`CLAUDE.md`, `AGENTS.md`, `GEMINI.md`), commands and agents from one folder in
the home (`~/.claude`, `~/.codex`, `~/.gemini`) and write their sessions there. A task from an
untrusted source (a GitHub issue: text by other people) never gets that shared folder: it gets
a folder of its own in worker's state folder, the operator's credentials and settings copied in
before each start, so that nothing it leaves there (a hook, a memory file, a command) is loaded
by any other task, trusted or not, boxed or not. Its sessions stay in its own folder, so it
resumes them; the box lets it write that folder and no other CLI folder.

The copy goes one way (shared to own), is made again before each start (what the agent changed
in its copy of the settings does not outlive the iteration), and never follows a link the
agent left in its folder. The folder is removed when the task has ended for good (`remove`;
a waiting task keeps it: it resumes its session from there), and retention sweeps the folders
of tasks that ended without it (worker/state/retention_cli.py).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from worker.process.platform.names import portable_name

log = logging.getLogger(__name__)

# The sources whose tasks are text by other people (box.for_task gives them untrusted_mode).
UNTRUSTED_SOURCES = frozenset({"github"})
FOLDER = "cli-folders"  # under the workspace's state folder
# What each CLI needs from the operator's folder to start: credentials and configuration, read
# from (variable naming the folder, default under ~), into the same names in the task's folder.
# Sessions, history and caches are left behind.
_COPIED = {
    "claude": ("CLAUDE_CONFIG_DIR", ".claude", (".credentials.json", "settings.json", "CLAUDE.md")),
    "codex": ("CODEX_HOME", ".codex", ("auth.json", "config.toml", "AGENTS.md")),
    "gemini": (
        "GEMINI_CLI_HOME",
        ".gemini",
        (
            "settings.json",
            "oauth_creds.json",
            "google_accounts.json",
            "installation_id",
            ".env",
            "GEMINI.md",
        ),
    ),
}


def untrusted(source: str) -> bool:
    return source in UNTRUSTED_SOURCES


def folder_for(state: Path, task_id: str) -> Path:
    """The task's own folder of CLI folders (one per agent inside)."""
    return state / FOLDER / portable_name(task_id)


def remove(state: Path, task_id: str) -> bool:
    """Remove the task's folder, never following a link the agent left in it (a link is
    removed, not what it points at); True when there was one. A failure is logged: retention
    tries again later."""
    return remove_folder(folder_for(state, task_id))


def remove_folder(path: Path) -> bool:
    """`path` removed, a link (at the top or inside) unlinked and never followed: rmtree
    neither descends into a link nor removes what it points at; no agent of the task runs
    any more to swap a folder for a link meanwhile."""
    try:
        if path.is_symlink():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)
        else:
            return False
    except OSError as exc:
        log.warning("could not remove the CLI folder %s: %s", path, exc)
        return False
    return True


def shared_folder(agent: str, env: Mapping[str, str]) -> Path | None:
    """The operator's folder of `agent` (the one trusted tasks load), None for another agent."""
    if agent not in _COPIED:
        return None
    variable, default, _ = _COPIED[agent]
    named = env.get(variable)
    home = Path(env.get("HOME") or Path.home())
    if named and agent == "gemini":  # GEMINI_CLI_HOME names the home that holds .gemini
        return Path(named) / ".gemini"
    return Path(named) if named else home / default


def variables(agent: str, own: Path) -> dict[str, str]:
    """The environment that points `agent` at the task's folder `own`."""
    if agent not in _COPIED:
        return {}
    variable = _COPIED[agent][0]
    return {variable: str(own / agent)}


def prepare(agent: str, own: Path, env: Mapping[str, str]) -> dict[str, str]:
    """Make the task's folder for `agent` (the CLI's folder inside `own`), copy the operator's
    credentials and settings in, and return the variables that point the CLI at it."""
    shared = shared_folder(agent, env)
    if shared is None:
        return {}
    target = own / agent / ".gemini" if agent == "gemini" else own / agent
    target.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name in _COPIED[agent][2]:
        _copy(shared / name, target / name)
    if agent == "claude":  # its own settings file: in the folder when one is named, else ~
        named = env.get("CLAUDE_CONFIG_DIR")
        home = Path(env.get("HOME") or Path.home())
        _copy(
            Path(named) / ".claude.json" if named else home / ".claude.json",
            target / ".claude.json",
        )
    return variables(agent, own)


def _copy(source: Path, target: Path) -> None:
    """`source` (the operator's) over `target` (the agent's): whatever the agent left at that
    name (a link, a folder) is removed first, and the file is made anew, never through a link."""
    try:
        data = source.read_bytes()
    except OSError:  # the operator has no such file: none in the copy either
        data = None
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    if data is None:
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(target, flags, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
