"""Worker's own files survive the agent.

Without `--use-worktree` the agent works in the workspace itself, where `worker.toml`, the
modes file and the state folder live. An agent (or the untrusted text it read) must not be able
to change how the next run behaves: a mode gaining `--dangerously-skip-permissions`, a new
fallback command. Agents have deleted their runners' own files (`git clean`). So the
configuration is snapshotted before the task and restored after it, the agent's version kept
beside the run's logs; a deleted database is written back from the open connection. The
user-wide config.toml is kept the same way.
"""

from __future__ import annotations

import logging
from pathlib import Path

from worker.config import CONFIG_FILE, Settings
from worker.modes import modes_path
from worker.state.fsutil import atomic_write_text
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

    def check(self, store: Store, keep_dir: Path) -> list[str]:
        """Restore what the agent changed; return reason codes for what was restored."""
        codes: list[str] = []
        for path, before in self.saved.items():
            after = _read(path)
            if after == before:
                continue
            log.warning("the agent changed %s; restored (its version kept in %s)", path, keep_dir)
            if after is not None:
                atomic_write_text(keep_dir / f"agent-{path.name}", after)
            if before is None:
                path.unlink(missing_ok=True)
            else:
                atomic_write_text(path, before)
            codes.append("WORKER_CONFIG_RESTORED")
        if store.restore_file():
            log.warning("the agent deleted %s; written back from the open database", store.path)
            codes.append("WORKER_STATE_RESTORED")
        return list(dict.fromkeys(codes))


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        return None
    except (OSError, UnicodeDecodeError):
        return ""
