"""The policy of one agent invocation: the folders it may write (the working tree or worktree,
the CLI's session folder), those it may not read, the hosts it may reach; and the sandbox
mode a task runs with.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worker.config import Settings
from worker.sandbox import reach
from worker.sandbox.hosts import box_files, model_hosts, no_proxy_without

# Where each agent CLI keeps its sessions and settings: (variable naming it, default under ~).
SESSION_DIRS: dict[str, tuple[tuple[str, str], ...]] = {
    "claude": (("CLAUDE_CONFIG_DIR", ".claude"),),
    "codex": (("CODEX_HOME", ".codex"),),
    "gemini": (("GEMINI_CLI_HOME", ".gemini"),),
}
TMP_PLACEHOLDER = "<private tmp>"


@dataclass(frozen=True)
class Policy:
    """What one agent invocation may do: the folders it may write, those it may not read (and
    those re-opened beneath them), the hosts it may reach."""

    write: list[Path]
    deny_read: list[Path]
    allow_read: list[Path]
    hosts: list[str]
    no_proxy: str | None = None  # the proxy-bypass list, when the model's host is local
    tmp: Path = Path(TMP_PLACEHOLDER)
    private: list[Path] = field(default_factory=list)  # empty in the box (/tmp, /run)
    read_back: list[Path] = field(default_factory=list)  # system files read from those
    # Files in a writable folder that stay read-only: those worker reads to make the box.
    read_only: list[Path] = field(default_factory=list)


_STRENGTH = {"off": 0, "auto": 1, "required": 2}


def for_task(settings: Settings, source: str) -> Settings:
    """The settings a task runs with: one from GitHub issues (text by other people) gets at
    least `[sandbox] untrusted_mode`, whatever `mode` says."""
    box = settings.sandbox
    if source != "github" or _STRENGTH[box.untrusted_mode] <= _STRENGTH[box.mode]:
        return settings
    return settings.with_sections(sandbox=box.model_copy(update={"mode": box.untrusted_mode}))


def policy_for(
    settings: Settings,
    agent: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    *,
    create: bool = False,
    tree: bool = True,
) -> Policy:
    """The limits of one invocation of `agent` in `cwd` (`create`: make the CLI's session
    folder if missing, for bubblewrap binds only what exists; a dry run makes nothing;
    `tree`: the working tree may be written, which a read-only mode turns off)."""
    env = os.environ if env is None else env
    box = settings.sandbox
    home = Path(env.get("HOME") or Path.home())
    cwd = cwd.resolve()
    git_dirs = _git_dirs(settings.workspace.resolve(), cwd)
    write = [cwd, *git_dirs] if tree else []
    sessions = session_dirs(agent, env, home, create)
    write += sessions
    write += [reach.absolute(settings, path) for path in box.allow_write]
    deny = reach.deny_list(settings, home, env)
    private = reach.private_dirs()
    # A worktree lives in the state folder: its own tree is open again, the others are not.
    allow_read = [path for path in write if any(inside(path, d) for d in [*deny, *private])]
    hosts = [*model_hosts(agent, env, home), *box.allow_hosts]
    return Policy(
        write=_unique(write),
        deny_read=_unique(deny),
        allow_read=_unique(allow_read),
        hosts=_unique(hosts),
        no_proxy=no_proxy_without(hosts),
        private=private,
        # A worktree's repository (its config, refs), where /tmp hides it: read-only.
        read_back=reach.read_back(private, [d.parent for d in git_dirs[1:]]),
        read_only=box_files(agent, sessions, create=create),
    )


def session_dirs(agent: str, env: Mapping[str, str], home: Path, create: bool) -> list[Path]:
    """The CLI folders `agent` writes its sessions to (its variable, else under the home)."""
    found = []
    for variable, default in SESSION_DIRS.get(agent, ()):
        named = env.get(variable)
        path = Path(named) if named else home / default
        if variable == "GEMINI_CLI_HOME" and named:
            path = path / ".gemini"
        if create:
            path.mkdir(parents=True, exist_ok=True)
        found.append(path.resolve())
    return found


def _git_dirs(workspace: Path, cwd: Path) -> list[Path]:
    """A task worktree's own git folder (its index and HEAD) and the object store it shares
    with the main repository (`git add` writes there; new objects change nothing by
    themselves). Both from worker's own record (`.git/worktrees/<name>` of the workspace,
    as `process/worktree` makes it), never from the worktree's `.git` file or
    `commondir`, which the agent can rewrite to be given another folder in its next box.
    Its refs stay read-only: worker commits the worktree's work itself."""
    common = workspace / ".git"
    if cwd == workspace or not (cwd / ".git").is_file() or common.is_symlink():
        return []
    own = common / "worktrees" / cwd.name
    found = [own, common / "objects"]
    return [path for path in found if path.is_dir() and not path.is_symlink()]


def inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _unique(items: list[Any]) -> list[Any]:
    return list(dict.fromkeys(items))
