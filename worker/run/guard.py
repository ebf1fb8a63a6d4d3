"""Worker's own files survive the agent.

Without `--use-worktree` the agent works in the workspace itself, where `worker.toml`, the
modes file and the state folder live. An agent (or the untrusted text it read) must not be able
to change how the next run behaves: a mode gaining `--dangerously-skip-permissions`, a new
fallback command. Agents have deleted their runners' own files (`git clean`). So the
configuration is snapshotted before the task and restored after it, the agent's version kept
beside the run's logs; a deleted database is written back from the open connection. The
user-wide config.toml is kept the same way.

The restore acts on the paths themselves: a file the agent turned into a link is read as the
link (never through it) and replaced; a folder on the way (`modes/`) that the agent turned into
a link is removed as a link and made again, so nothing is written or deleted where it points.
"""

from __future__ import annotations

import logging
from pathlib import Path

from worker.config import CONFIG_FILE, Settings
from worker.modes import modes_path
from worker.state.fsutil import atomic_write_text, is_link
from worker.state.store import Store

log = logging.getLogger(__name__)


class WorkspaceGuard:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        paths = [settings.workspace / CONFIG_FILE, settings.workspace / "modes" / "modes.json"]
        configured = modes_path(settings.workspace, settings.modes_file)
        if configured is not None and configured not in paths:
            paths.append(configured)
        # The user-wide config.toml (or --config FILE) read for this run: outside the tree,
        # but where an agent without a box could write too.
        read = settings.sources.files if settings.sources is not None else ()
        paths += [path for _layer, path, _there in read if path not in paths]
        self.saved = {path: _read(path) for path in paths}
        # The folders between the workspace and each file, when they are real folders now (a
        # link the operator made before the run is theirs, and stays).
        self.folders = {path: _folders(settings.workspace, path) for path in paths}

    def check(self, store: Store, keep_dir: Path) -> list[str]:
        """Restore what the agent changed; return reason codes for what was restored."""
        codes: list[str] = []
        for path, before in self.saved.items():
            linked = [f for f in self.folders[path] if is_link(f, "restore a file")]
            after = None if linked else _read(path)
            if after == before and not linked:
                continue
            for folder in linked:  # the agent's link in the tree: removed, never followed
                folder.unlink()
            log.warning("the agent changed %s; restored (its version kept in %s)", path, keep_dir)
            if after is not None:
                atomic_write_text(keep_dir / f"agent-{path.name}", after)
            if before is None:
                if not linked:
                    path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)  # in place of a removed link
                atomic_write_text(path, before)
            codes.append("WORKER_CONFIG_RESTORED")
        if store.restore_file():
            log.warning("the agent deleted %s; written back from the open database", store.path)
            codes.append("WORKER_STATE_RESTORED")
        return list(dict.fromkeys(codes))


def _folders(workspace: Path, path: Path) -> list[Path]:
    """The folders from the workspace down to `path`'s (the workspace itself not included),
    when `path` lies in the workspace and they are real folders now."""
    try:
        parts = path.parent.relative_to(workspace).parts
    except ValueError:
        return []
    folders = [workspace.joinpath(*parts[: n + 1]) for n in range(len(parts))]
    return [] if any(f.is_symlink() for f in folders) else folders


def _read(path: Path) -> str | None:
    """The file's text; a link in its place reads as its own description, never through it,
    and so does a FIFO or a device (reading one could block the run for good)."""
    if is_link(path, "read a file"):
        return f"(a symbolic link to {path.readlink()})"
    try:
        if not path.is_dir() and path.exists() and not path.is_file():
            return "(not a regular file)"
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        return None
    except (OSError, UnicodeDecodeError):
        return ""
