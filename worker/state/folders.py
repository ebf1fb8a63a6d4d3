"""The folders worker writes (state, logs, wait states, the inbox): each one a folder or able to
become one, checked as the settings load and made before a run takes a task, so that a path
set to a file, or under one, is a configuration error naming its key (exit 78), never an
unexpected error after an agent was paid."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from worker.errors import ConfigError
from worker.state.statedir import migrate_legacy

if TYPE_CHECKING:
    from worker.config import Settings

_WHERE = " (set in worker.toml or a WORKER_* variable)"


def folders(settings: Settings) -> list[tuple[str, Path]]:
    """Each folder with the key that sets it."""
    inbox_key = "inbox_dir" if settings.inbox_dir is not None else "state_dir (its inbox/)"
    found = [
        ("state_dir", settings.state),
        ("state_dir (its logs/ folder)", settings.logs),
        ("wait_states_dir", settings.wait_states),
        (inbox_key, settings.inbox),
    ]
    if settings.reports_dir is not None:
        found.append(("reports_dir", settings.reports))
    return found


def check_folders(settings: Settings) -> None:
    """Refuse a folder that is a file, or lies under one (it could never be made)."""
    for key, path in folders(settings):
        problem = _blocked(path)
        if problem is not None:
            shown = str(path).replace("\0", "\\0")  # a NUL would end the line on a terminal
            raise ConfigError(f"{key}: {shown} cannot be a folder: {problem}{_WHERE}")


def make_folders(settings: Settings) -> None:
    """Make the folders a run writes; the inbox only when it is worker's own (one set by
    `inbox_dir` that does not exist is reported by the inbox source instead). A workspace's
    old `.worker/` folder is moved into place first, as the workspace lock would."""
    migrate_legacy(settings.workspace, settings.state)
    for key, path in folders(settings):
        if key == "inbox_dir":
            continue
        try:
            path.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
            raise ConfigError(f"{key}: cannot make the folder {path}: {_why(exc)}{_WHERE}") from exc
        if not path.is_dir():
            raise ConfigError(f"{key}: {path} is not a folder{_WHERE}")


def _why(exc: Exception) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


def _blocked(path: Path) -> str | None:
    """Why `path` cannot be a folder (it, or the nearest existing folder above it, is a
    file), or None."""
    if "\0" in str(path):
        return "the path holds a NUL character"
    for place in (path, *path.parents):
        try:
            is_dir = place.is_dir()
            exists = is_dir or place.exists()
        except OSError as exc:  # a name too long, a loop of links
            return exc.strerror or str(exc)
        if is_dir:
            return None
        if exists:
            return f"{place} is a file" if place == path else f"{place} above it is a file"
    return None
