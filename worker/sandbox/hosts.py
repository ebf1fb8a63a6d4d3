"""The hosts an agent's sandbox lets it reach: its model's API, read from the agent's own
configuration (`ANTHROPIC_BASE_URL`, the Codex provider, `GOOGLE_GEMINI_BASE_URL`) or the
vendor's default, and the proxy-bypass list that keeps a local API behind the filtering proxy.

The variables are worker's own environment. Codex's provider is a file in the CLI's folder,
which the agent writes (its sessions): the box keeps that file read-only (`box_files`), and
worker reads it only when it is a regular file, never through a link; else what the agent
wrote there would widen its next box's network (docs/architecture.md, "What the agent writes
is data").
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import os
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from worker.errors import ConfigError
from worker.state.fsutil import read_text

log = logging.getLogger(__name__)

# The vendors' API hosts (and the login hosts their CLIs refresh tokens at).
DEFAULT_HOSTS = {
    "claude": ["api.anthropic.com", "console.anthropic.com", "claude.ai"],
    "codex": ["api.openai.com", "chatgpt.com", "auth.openai.com"],
    "gemini": [
        "generativelanguage.googleapis.com",
        "cloudcode-pa.googleapis.com",
        "oauth2.googleapis.com",
    ],
}
# What the sandbox runtime puts in NO_PROXY inside the box (sandbox-utils.js of
# @anthropic-ai/sandbox-runtime): these go direct, which inside the box reaches nothing.
SRT_NO_PROXY = (
    "localhost",
    "127.0.0.1",
    "::1",
    "169.254.0.0/16",
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
)
# The files of an agent CLI's folder that worker reads to make the box: each box keeps them
# read-only (a missing one is made empty first, so that the agent cannot create it).
BOX_FILES: dict[str, tuple[str, ...]] = {"codex": ("config.toml",)}


def model_hosts(agent: str, env: Mapping[str, str], home: Path) -> list[str]:
    """Where `agent` sends its model calls, as sandbox host entries ("host" or "host:port")."""
    url = None
    if agent == "claude":
        url = env.get("ANTHROPIC_BASE_URL")
    elif agent == "gemini":
        url = env.get("GOOGLE_GEMINI_BASE_URL")
    elif agent == "codex":
        url = codex_base_url(env, home)
    if url:
        entry = host_entry(url)
        return [entry] if entry else []
    return list(DEFAULT_HOSTS.get(agent, []))


def codex_base_url(env: Mapping[str, str], home: Path) -> str | None:
    """The base URL of Codex's model provider (CODEX_HOME/config.toml), or OPENAI_BASE_URL."""
    folder = Path(env.get("CODEX_HOME") or home / ".codex")
    try:
        config = tomllib.loads(_regular_text(folder / "config.toml"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        config = {}
    provider = config.get("model_provider")
    providers = config.get("model_providers")
    if isinstance(provider, str) and isinstance(providers, dict):
        chosen = providers.get(provider)
        if isinstance(chosen, dict) and isinstance(chosen.get("base_url"), str):
            return str(chosen["base_url"])
    return env.get("OPENAI_BASE_URL")


def _regular_text(path: Path) -> str:
    """The text of `path` if it is a regular file: never through a link (a warning says so),
    never a FIFO (whose open would wait for a writer). OSError otherwise."""
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        log.warning("%s is a symbolic link: worker does not read it for the sandbox", path)
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return read_text(path)  # O_NOFOLLOW: a link put there since the lstat is not followed


def box_files(agent: str, folders: list[Path], *, create: bool) -> list[Path]:
    """The files of `agent`'s CLI folders that worker reads to make its box (`BOX_FILES`),
    for the box to keep read-only. `create`: a missing one is made, empty (Codex reads an empty
    config.toml as none), so that there is a file to keep; one that is not a regular file (a
    link, which no mount can pin by its name) refuses the box."""
    found = [folder / name for folder in folders for name in BOX_FILES.get(agent, ())]
    for path in found:
        if create:
            with contextlib.suppress(FileExistsError):
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                os.close(os.open(path, flags, 0o600))
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue  # the preflight's look (`create` off): made at the launch
        if not stat.S_ISREG(mode):
            raise ConfigError(
                f"{path} is not a regular file (a symbolic link?): the agent's sandbox "
                "cannot keep it read-only, and worker reads the model's host from it; "
                "put the file itself there"
            )
    return found


def host_entry(url: str) -> str | None:
    """`http://127.0.0.1:8080/v1` -> `127.0.0.1:8080`; `https://api.x.com` -> `api.x.com`."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname
    if not host:
        return None
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}" if port else shown


def no_proxy_without(hosts: list[str]) -> str | None:
    """The runtime's proxy-bypass list less what covers a local host the agent must reach (a
    model API on 127.0.0.1): None when no allowed host is local (the runtime's list stands)."""
    local = [_host_of(entry) for entry in hosts]
    kept = [item for item in SRT_NO_PROXY if not any(_covers(item, h) for h in local if h)]
    return None if len(kept) == len(SRT_NO_PROXY) else ",".join(kept)


def _host_of(entry: str) -> str:
    if entry.startswith("["):
        return entry[1:].split("]", 1)[0]
    return entry.rsplit(":", 1)[0] if entry.count(":") == 1 else entry


def _covers(item: str, host: str) -> bool:
    if item == host:
        return True
    if "/" not in item:
        return False
    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(item)
    except ValueError:
        return False
