"""What the agent's sandbox is and did, in words: `worker doctor`'s report (the runtime, that
it can run here, what it enforces on this platform) and the refusals an iteration's record
keeps (worker/sandbox/box.py)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from worker.config import Settings
from worker.sandbox.box import Runtime, find_runtime
from worker.sandbox.reach import deny_list
from worker.sandbox.settings import SandboxSettings

if TYPE_CHECKING:
    from worker.models import AgentEvent


# What each platform gets, for `worker doctor` and the README.
PLATFORM_NOTES = {
    "linux": "Linux: srt enforces files and network (bubblewrap with a filtering proxy); "
    "bubblewrap alone enforces the files only",
    "darwin": "macOS: srt enforces files and network (sandbox-exec with a filtering proxy); "
    "there is no fallback",
    "win32": 'Windows: worker enforces nothing by default; with [sandbox] runtime = "srt" '
    "(alpha: an elevated `srt windows-install` first) srt enforces writes and the network "
    "under a separate account",
}


def describe(settings: Settings) -> list[tuple[str, str]]:
    """What the agent's sandbox will be here, as (ok | warn | fail, words) for `worker doctor`."""
    box = settings.sandbox
    platform = "linux" if sys.platform.startswith("linux") else sys.platform
    note = PLATFORM_NOTES.get(platform, f"{sys.platform}: no sandbox runtime is known here")
    runtime, why = find_runtime(box)
    if (
        runtime is None
        and box.mode == "off"
        and box.untrusted_mode != "off"
        and settings.github.repos
    ):
        return [
            (
                "warn",
                f"{why}: inbox tasks run unboxed; tasks from GitHub issues (text by other "
                f"people) are boxed anyway ([sandbox] untrusted_mode = {box.untrusted_mode!r})",
            ),
            ("ok", note),
        ]
    if runtime is None:
        status = {"off": "warn", "auto": "warn", "required": "fail"}[box.mode]
        then = {
            "off": "agents run with everything the user can reach",
            "auto": "agents run unboxed, with a warning",
            "required": "no agent will start (exit 78)",
        }[box.mode]
        return [(status, f"{why}: {then}"), ("ok", note)]
    denied = deny_list(settings, Path(os.environ.get("HOME") or Path.home()))
    status = "ok" if runtime.network else "warn"
    return [
        (status, _enforced(runtime, denied, box)),
        ("ok" if runtime.network else "warn", _not_enforced(runtime)),
        ("ok", note),
    ]


def _enforced(runtime: Runtime, deny: list[Path], box: SandboxSettings) -> str:
    denied = ", ".join(str(path) for path in list(dict.fromkeys(deny)))
    network = (
        f"only the model's API host and {', '.join(box.allow_hosts) or 'nothing else'}"
        if runtime.network
        else "NOT limited (bubblewrap alone has no proxy: install srt)"
    )
    capabilities = (
        "none (--cap-drop ALL, as root too)"
        if runtime.name == "bwrap"
        else "only inside srt's own user namespace, where its seccomp filter refuses the calls "
        "that change a mount"
    )
    return (
        f"agents run in {runtime.name} ({runtime.path}, mode {box.mode}): writes only to the "
        f"working tree, the agent CLI's session folder and a private tmp; reads refused for "
        f"{denied}; /tmp and /run empty (no other program's files, no ssh-agent, D-Bus, "
        f"PostgreSQL or docker socket); environment by allow-list (PATH, HOME, locale, proxy, "
        f"the agent's own API variables, [sandbox] pass_env; never a secret worker knows of); "
        f"capabilities: {capabilities}; network: {network}"
    )


def _not_enforced(runtime: Runtime) -> str:
    """What the box leaves open with this runtime, said as plainly as what it holds."""
    common = (
        "not enforced: the agent may do anything inside its tree and its CLI's session "
        "folder (worker treats both as data), and use all the CPU, memory and disk it is given "
        "until the task's timeout"
    )
    if runtime.network:
        return f"{common}; local TCP services reach only through srt's proxy allow-list"
    return (
        f"{common}; with bubblewrap alone any host is reachable, loopback included: local "
        "services (the dashboard, a database on 127.0.0.1) see the agent as a local client"
    )


# What the runtimes answer a refused access with, as the agent's tools see it: a read-only
# mount (EROFS), the proxy's refusal (srt's http-proxy.js and socks-proxy.js).
_REFUSED = re.compile(
    r"Read-only file system|Connection blocked by network allowlist|blocked-by-sandbox-runtime"
    r"|connection not allowed by ruleset"
)
_REFUSALS_KEPT = 10


def refusals(events: list[AgentEvent]) -> list[str]:
    """The lines of the agent's tool results (or a plain agent's output) where the box refused
    something, at most 10 and 200 characters each: the iteration's record keeps them."""
    found: list[str] = []
    for event in events:
        if event.kind.value not in ("tool_result", "text") or not event.text:
            continue
        for line in event.text.splitlines():
            if _REFUSED.search(line):
                found.append(line.strip()[:200])
                if len(found) >= _REFUSALS_KEPT:
                    return found
    return found
