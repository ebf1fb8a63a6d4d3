"""Retention of the per-task CLI folders (worker/sandbox/cli_home.py).

A task's folder is removed when the task ends for good; this sweep removes what that left
behind: the folders of tasks that no longer wait nor run (ended while the removal failed,
dropped from their source, their records gone) and whose folder nobody touched for `runs_days`.
A waiting task keeps its folder (it resumes its CLI session from there), whatever its age.
Removal never follows a link the agent left in a folder.
"""

from __future__ import annotations

from pathlib import Path

from worker.config import Settings
from worker.process.platform.names import portable_name
from worker.sandbox.cli_home import FOLDER, remove_folder
from worker.state.store import Store

_DAY_S = 86400.0


def stale_cli_folders(settings: Settings, store: Store | None, now: float) -> list[Path]:
    """The task folders under `<state>/cli-folders` to remove: no wait state, no active
    claim, nothing in them changed for `runs_days`."""
    root = settings.state / FOLDER
    if root.is_symlink() or not root.is_dir():
        return []
    running = {portable_name(c["task_id"]) for c in store.active_claims()} if store else set()
    before = now - settings.retention.runs_days * _DAY_S
    stale = []
    for folder in sorted(root.iterdir()):
        name = folder.name
        if name in running or (settings.wait_states / f"{name}.json").exists():
            continue
        if _last_touched(folder) < before:
            stale.append(folder)
    return stale


def sweep_cli_folders(settings: Settings, store: Store | None, now: float, dry_run: bool) -> int:
    """Remove (or, with `dry_run`, count) the stale task folders; the number of them."""
    stale = stale_cli_folders(settings, store, now)
    if dry_run:
        return len(stale)
    return sum(remove_folder(folder) for folder in stale)


def _last_touched(folder: Path) -> float:
    """The newest change to the folder or an agent's folder in it (each start rewrites the
    agent's folder: the operator's settings copied in anew), never through a link."""
    times = []
    for path in [folder, *_entries(folder)]:
        try:
            times.append(path.lstat().st_mtime)
        except OSError:
            continue
    return max(times, default=0.0)


def _entries(folder: Path) -> list[Path]:
    if folder.is_symlink() or not folder.is_dir():
        return []
    try:
        return list(folder.iterdir())
    except OSError:
        return []
