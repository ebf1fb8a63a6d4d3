"""A policy as each runtime takes it: the sandbox runtime's settings file, bubblewrap's
arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worker.sandbox.policy import Policy, inside


def srt_settings(policy: Policy) -> dict[str, Any]:
    """The sandbox runtime's settings file (its README: Configuration)."""
    return {
        "network": {"allowedDomains": policy.hosts, "deniedDomains": []},
        "filesystem": {
            "denyRead": [str(path) for path in [*policy.private, *policy.deny_read]],
            "allowRead": [str(path) for path in [*policy.allow_read, *policy.read_back]],
            "allowWrite": [str(path) for path in policy.write],
            "denyWrite": [str(path) for path in policy.read_only],
        },
    }


def bwrap_args(policy: Policy, cwd: Path) -> list[str]:
    """bubblewrap's arguments: no capability (as root too: `umount` and `mount -o remount`
    refused), the system read-only, /tmp and /run empty, the denied paths hidden (an empty
    folder, made read-only last, once the writable paths beneath it are bound back), the
    writable ones bound back, the read-only files in them bound over them (a regular file only:
    a mount on a link would land on what it points at); a parent's mount before the mounts
    beneath it."""
    denied = [path for path in policy.deny_read if path.exists()]
    # A denied path inside another is hidden with it (its mount point could not be made).
    denied = [p for p in denied if not any(d != p and inside(p, d) for d in denied)]
    mounts = [(path, ["--tmpfs", str(path)]) for path in policy.private]
    mounts += [(path, ["--ro-bind", str(path), str(path)]) for path in policy.read_back]
    for path in denied:
        if path.is_dir():
            mounts.append((path, ["--tmpfs", str(path)]))
        else:
            mounts.append((path, ["--ro-bind", "/dev/null", str(path)]))
    for path in policy.write:
        if path.exists():
            mounts.append((path, ["--bind", str(path), str(path)]))
    for path in policy.read_only:
        if path.is_file() and not path.is_symlink():
            mounts.append((path, ["--ro-bind", str(path), str(path)]))
    args = ["--die-with-parent", "--unshare-pid", "--unshare-ipc", "--cap-drop", "ALL"]
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for _, mount in sorted(mounts, key=lambda item: len(item[0].parts)):
        args += mount
    for path in [*denied, *(p for p in policy.private if not p.name.endswith("tmp"))]:
        if path.is_dir():
            args += ["--remount-ro", str(path)]
    args += ["--setenv", "TMPDIR", str(policy.tmp), "--chdir", str(cwd)]
    return args
