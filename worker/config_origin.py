"""Where the settings come from: the user-wide `config.toml` in the platform's place for a
user's configuration, and `Sources`, the files read and the origin of each key given.
"""

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

USER_CONFIG = "config.toml"
CONFIG_VAR = "WORKER_CONFIG"  # `--config FILE`, as the variable the run's children inherit


def user_config_path(env: Mapping[str, str], platform: str = sys.platform) -> Path:
    """The user-wide `config.toml`, where the platform keeps a user's configuration:
    `$XDG_CONFIG_HOME/worker/` (else `~/.config/worker/`), `~/Library/Application Support/
    worker/` on macOS, `%APPDATA%\\worker\\` on Windows."""
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    if platform == "win32":
        appdata = env.get("APPDATA")
        base = Path(appdata) if appdata else home / "AppData" / "Roaming"
    elif platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        xdg = env.get("XDG_CONFIG_HOME", "")
        # The XDG specification ignores a relative path in its variables.
        base = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".config"
    return base / "worker" / USER_CONFIG


@dataclass(frozen=True)
class Sources:
    """Where the settings came from: the files in the order read (lowest first), each with
    whether it was there, and the origin of each key given (a file, a variable, the command
    line); a key with none has its default. Command line > environment > workspace file >
    user file > defaults."""

    files: tuple[tuple[str, Path, bool], ...]  # (layer, path, read)
    origin: Mapping[tuple[str, ...], str]

    def given(self) -> list[tuple[tuple[str, ...], str]]:
        """Each key given, with its origin, in a stable order (leaves only)."""
        keys = sorted(self.origin)
        leaves = [k for k in keys if not any(o[: len(k)] == k and o != k for o in keys)]
        return [(key, self.origin[key]) for key in leaves]
