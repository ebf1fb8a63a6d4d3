"""What the box hides (worker/sandbox/box.py), and the environment an agent gets in it.

- the user's secrets folders (`~/.ssh`, cloud and GitHub credentials, ...);
- worker's own: the whole state home (every workspace's state folder, not only this one's),
  worker's user configuration folder (where the printed systemd unit keeps tokens), the files
  and variables the settings name as holding secrets (`*_env`, `*token*_file`...);
- PostgreSQL's password file (`~/.pgpass`, `PGPASSFILE`): with the fleet's database on this
  host, an order row written by the agent would be trusted by every machine;
- the folders where a process of the same user is let in by whoever connects: `/run` (D-Bus's
  session bus in `/run/user/<uid>`, PostgreSQL's peer authentication in `/run/postgresql`,
  docker's socket) and `/tmp` (ssh-agent's socket, other programs' files, a push's token
  file): empty in the box, `/tmp` a private one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worker import secrets
from worker.config import LAZY_SECTIONS, Settings
from worker.state.statedir import state_home

# The user's secrets: keys, cloud and GitHub credentials, git's stored passwords.
SECRET_PATHS = (
    ".ssh",
    ".aws",
    ".config/gh",
    ".netrc",
    ".git-credentials",
    ".gnupg",
    ".docker/config.json",
    ".kube",
    ".config/gcloud",
    ".azure",
)
# Replaced by an empty folder in the box (`/tmp` writable, private to one invocation); each
# only where it is a folder of its own (on many systems /var/run is a link to /run).
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/run", "/var/run")
# Read again from a private folder where the system keeps them there (systemd-resolved's
# /etc/resolv.conf is a link into /run): name resolution and the time zone keep working.
SYSTEM_LINKS = ("/etc/resolv.conf", "/etc/localtime")


def _sections(settings: Settings) -> list[Any]:
    return [settings, *(getattr(settings, name) for name in LAZY_SECTIONS)]


def named_secrets(settings: Settings) -> tuple[set[str], list[Path]]:
    """The variables and the files the settings name as holding a secret: every `*_env` field
    (`[notify.telegram] token_env`) and every `*_file` field whose name says secret, in every
    section; a new such setting is covered without another list to update."""
    variables = secrets.variables_named_by(*_sections(settings))
    files = [Path(p) for p in secrets.files_named_by(*_sections(settings))]
    return variables, files


def deny_list(settings: Settings, home: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """What the agent may not read: the user's secrets, worker's state home, state folder,
    database, inbox and configuration, and `[sandbox] deny_read`."""
    deny = [home / name for name in SECRET_PATHS]
    deny += [settings.state.resolve(), settings.inbox.resolve(), settings.db_path.resolve()]
    deny += worker_denied(settings, home, os.environ if env is None else env)
    return deny + [absolute(settings, path) for path in settings.sandbox.deny_read]


def absolute(settings: Settings, path: Path) -> Path:
    """`path` of a setting: `~` expanded, relative to the workspace, resolved."""
    path = path.expanduser()
    return (path if path.is_absolute() else settings.workspace / path).resolve()


def worker_denied(settings: Settings, home: Path, env: Mapping[str, str]) -> list[Path]:
    """worker's own places the box hides: the state home, the user configuration folder, the
    PostgreSQL password file, the files the settings and the environment name as secrets."""
    config = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    places = [state_home(env), config / "worker", home / ".pgpass"]
    if sys.platform == "darwin":
        places.append(home / "Library" / "Application Support" / "worker")
    places += [Path(env[name]) for name in ("PGPASSFILE", "PGSERVICEFILE") if env.get(name)]
    places += [
        Path(value)
        for name, value in env.items()
        if name.endswith("_FILE") and secrets.is_secret_name(name[: -len("_FILE")]) and value
    ]
    places += named_secrets(settings)[1]
    return [path.expanduser().resolve() for path in places]


def private_dirs() -> list[Path]:
    """The shared temporary and runtime folders, as this machine has them (links left out)."""
    return [Path(p) for p in PRIVATE_DIRS if os.path.isdir(p) and not os.path.islink(p)]


def read_back(private: list[Path], needed: list[Path]) -> list[Path]:
    """What lives in a private folder here and is read all the same: the system files kept
    there (through a link) and the `needed` paths."""
    found = [Path(os.path.realpath(link)) for link in SYSTEM_LINKS]
    return [
        path
        for path in [*found, *needed]
        if path.exists() and any(folder in path.parents for folder in private)
    ]


def agent_env(settings: Settings, agent: str) -> dict[str, str]:
    """The agent's environment in the box: by allow-list (worker/secrets.py), with
    `[sandbox] pass_env`; never a variable the settings name as a secret."""
    variables, _ = named_secrets(settings)
    secrets.remember(variables)
    return secrets.agent_env(agent, passed=settings.sandbox.pass_env, refused=variables)
