"""Where worker keeps its own state: one folder per workspace, outside the agent's reach.

The agent edits files in the working tree, so nothing that decides what worker does next (the
database, the intercom, control orders, logs, reports, locks, worktrees) lives there:

- Linux and macOS: `$XDG_STATE_HOME/worker/<workspace-id>`, else
  `~/.local/state/worker/<workspace-id>` (the XDG Base Directory specification's state home);
- Windows: `%LOCALAPPDATA%\\worker\\<workspace-id>`.

`<workspace-id>` is the folder's name and a short hash of its resolved path: readable in a
listing, stable across runs, and two folders with the same name never share one.

A workspace used by an older worker keeps its state in `<workspace>/.worker/`; the first run
moves it (`migrate_legacy`) and says so.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.config import Settings

log = logging.getLogger(__name__)

LEGACY_DIR = ".worker"
LEGACY_WAITS = "wait_states"


def state_home(env: Mapping[str, str] | None = None, platform: str = sys.platform) -> Path:
    """The user's root of worker state folders (`.../worker`)."""
    env = os.environ if env is None else env
    if platform == "win32":
        local = env.get("LOCALAPPDATA")
        base = Path(local) if local else Path.home() / "AppData" / "Local"
        return base / "worker"
    xdg = env.get("XDG_STATE_HOME", "")
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()  # `env`'s own, if it has one
    # The XDG specification ignores a relative path in its variables.
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".local" / "state"
    return base / "worker"


def workspace_id(workspace: Path) -> str:
    """`<name>-<8 hex>`: the folder's name (made safe) and a hash of its resolved path."""
    resolved = workspace.resolve()
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", resolved.name).strip("._") or "workspace"
    digest = hashlib.sha256(str(resolved).encode("utf-8")).hexdigest()[:8]
    return f"{name[:40]}-{digest}"


def default_state_dir(workspace: Path, env: Mapping[str, str] | None = None) -> Path:
    return state_home(env) / workspace_id(workspace)


def is_inside(path: Path, folder: Path) -> bool:
    """True when `path` is `folder` or lies under it (both resolved)."""
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def same(one: Path, other: Path) -> bool:
    """Whether two paths name the same folder (both resolved)."""
    return one.resolve() == other.resolve()


def legacy_dir(workspace: Path, state: Path) -> Path | None:
    """The old in-tree state folder when it exists and is not the configured state folder."""
    old = workspace / LEGACY_DIR
    if _linked(old) or not old.is_dir() or old.resolve() == state.resolve():
        return None
    return old


def migrate_legacy(workspace: Path, state: Path) -> str | None:
    """Move `<workspace>/.worker/` into `state` on the first run; return the line that says so
    (None when there was nothing to move). An existing, non-empty `state` is never
    overwritten: the old folder then stays, and the line says why."""
    old = legacy_dir(workspace, state)
    if old is None:
        return None
    if state.exists() and any(state.iterdir()):
        message = (
            f"worker state: {old} was not moved because {state} already holds state; "
            f"remove {old} once you no longer need it"
        )
        log.warning(message)
        return message
    state.parent.mkdir(parents=True, exist_ok=True)
    if state.exists():
        state.rmdir()
    shutil.move(str(old), str(state))
    message = f"worker state moved from {old} to {state} (out of the agent's working tree)"
    log.warning(message)
    return message


def legacy_wait_states(settings: Settings) -> Path | None:
    """`<workspace>/wait_states/`, where an older worker kept the wait states by default, when
    it still holds some and the settings use the default folder (in the state folder)."""
    old = settings.workspace / LEGACY_WAITS
    if settings.wait_states_dir is not None or _linked(old) or not old.is_dir():
        return None
    return old if _wait_entries(old) else None


def _linked(path: Path) -> bool:
    """A link in the tree, where the agent may have made it: never followed, and said."""
    if path.is_symlink():
        log.warning("%s is a symbolic link: worker does not follow it", path)
        return True
    return False


def _wait_entries(folder: Path) -> list[Path]:
    """The wait-state files and the folders of set-aside ones (rejected/, expired/, ...); not
    what else a repository may keep there (its `.gitkeep`), and no link (not followed)."""
    found = []
    for path in folder.iterdir():
        if path.is_symlink():
            log.warning("%s is a symbolic link: worker leaves it where it is", path)
        elif (path.suffix == ".json" and path.is_file()) or path.is_dir():
            found.append(path)
    return found


def migrate_wait_states(settings: Settings) -> str | None:
    """Move the waits of `legacy_wait_states` into the wait-state folder on the first run
    (their records, by file name, stay true); return the line that says so. A name already
    there is left where it was, and the line says so."""
    old = legacy_wait_states(settings)
    if old is None:
        return None
    new = settings.wait_states
    new.mkdir(parents=True, exist_ok=True)
    kept = []
    for entry in _wait_entries(old):
        if (new / entry.name).exists():
            kept.append(entry.name)
        else:
            shutil.move(str(entry), str(new / entry.name))
    if not any(old.iterdir()):
        old.rmdir()
    message = f"wait states moved from {old} to {new} (out of the repository)"
    if kept:
        message += f"; {', '.join(kept)} left in {old}: {new} already has them"
    log.warning(message)
    return message


def location_problem(settings: Settings) -> tuple[str, str] | None:
    """An inbox inside the working tree would let the agent queue its own tasks: refused
    (exit 78), unless `allow_inbox_in_workspace = true` says it is wanted. The problem and its
    fix, in words; None when the inbox is out of the agent's reach."""
    if settings.allow_inbox_in_workspace or not is_inside(settings.inbox, settings.workspace):
        return None
    if settings.inbox_dir is None and settings.state_dir is None:  # the workspace holds ~
        return (
            f"this folder holds worker's state folder {settings.state}, where the agent could "
            "write messages that worker would run as tasks",
            "run worker in your project's folder (cd into it, or --workspace DIR), or set "
            "state_dir to a folder outside this one",
        )
    key = "inbox_dir" if settings.inbox_dir is not None else "state_dir (holding the inbox)"
    return (
        f"{key}: {settings.inbox} lies inside the workspace, where the agent can write "
        "messages that worker would run as tasks",
        "move it out of the workspace, or set allow_inbox_in_workspace = true to accept that",
    )


def exposed(settings: Settings) -> list[str]:
    """worker's folders that the agent can write (inside the working tree), by setting name."""
    found = []
    if is_inside(settings.state, settings.workspace):
        found.append("state_dir")
    if is_inside(settings.inbox, settings.workspace):
        found.append("inbox_dir")
    return found


def describe(settings: Settings) -> dict[str, object]:
    """Where the state lives, for `worker status` (and `worker doctor`)."""
    old = legacy_dir(settings.workspace, settings.state)
    old_waits = legacy_wait_states(settings)
    return {
        "state_dir": str(settings.state),
        "inbox_dir": str(settings.inbox),
        "wait_states_dir": str(settings.wait_states),
        "in_workspace": exposed(settings),
        "legacy_state": str(old) if old is not None else None,
        "legacy_wait_states": str(old_waits) if old_waits is not None else None,
    }
