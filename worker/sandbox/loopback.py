"""Whether a process in the agent's box can reach this machine's loopback: the dashboard (and
any local service) is then within its reach. Bubblewrap alone leaves the network open (it has
no proxy); an agent without a box reaches everything; the sandbox runtime (`srt`) reaches only
its allowed hosts, which may name a local one (a model API on 127.0.0.1)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path

from worker.config import Settings
from worker.sandbox.box import find_runtime
from worker.sandbox.hosts import model_hosts

_AGENTS = ("claude", "codex", "gemini")


def loopback_reachable(settings: Settings, env: Mapping[str, str] | None = None) -> str | None:
    """Why an agent of this workspace could reach a server on loopback, in words; None when
    every task's box limits the network to hosts that are not local."""
    env = os.environ if env is None else env
    box = settings.sandbox
    for mode in dict.fromkeys((box.mode, box.untrusted_mode)):
        runtime, why = find_runtime(box.model_copy(update={"mode": mode}))
        if runtime is None:
            return f"an agent may run without a sandbox ({why})"
        if not runtime.network:
            return "bubblewrap alone leaves the agent's network open (install srt to limit it)"
    home = Path(env.get("HOME") or Path.home())
    hosts = [*box.allow_hosts, *(h for agent in _AGENTS for h in model_hosts(agent, env, home))]
    local = next((host for host in hosts if _local(host)), None)
    return None if local is None else f"the sandbox lets the agent reach {local} on this machine"


def _local(entry: str) -> bool:
    host = entry[1:].split("]", 1)[0] if entry.startswith("[") else entry.rsplit(":", 1)[0]
    if entry.count(":") > 1 and not entry.startswith("["):
        host = entry  # a bare IPv6 address
    if host.lower() in ("localhost", "*.localhost") or host.lower().endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified
