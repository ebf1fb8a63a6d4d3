"""Git helpers for the workspace: progress between iterations (what the work tree holds beyond
HEAD, its diff), and whether a task can be delivered as configured. Task worktrees are
`worker.process.worktree`'s; their names are importable from here too.

Every git call goes through `gitview.run_git` (the process chokepoint, a timeout, a view of the
repository that reads none of its configuration).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.config import Settings
from worker.delivery import delivery_of, in_worktree
from worker.process.gitview import main_checkout, open_data, run_git
from worker.process.worktree import (
    BOT_IDENTITY,
    branch_name,
    checkout_of,
    commit_message,
    create_worktree,
    drop_if_empty,
    ensure_repo,
    finish_worktree,
    identity,
)
from worker.state.fsutil import atomic_write_text

__all__ = [
    "BOT_IDENTITY",
    "WorkState",
    "branch_name",
    "changed_files",
    "checkout_of",
    "commit_message",
    "create_worktree",
    "delivery_problem",
    "diff_digest",
    "drop_if_empty",
    "ensure_repo",
    "finish_worktree",
    "identity",
    "save_diff",
    "work_state",
]


@dataclass(frozen=True)
class WorkState:
    """What the work tree holds beyond HEAD, from one `git status`."""

    files: list[str]  # changed, staged, deleted and untracked files, sorted
    digest: str  # equal digests mean no progress: HEAD, the status, the changed files' bytes


# A supervised iteration asks for the changed files and then the digest (worker/run/loop.py): both
# come from one `git status` taken for the first and handed to the second.
_last: tuple[Path, float, WorkState] | None = None
_HANDOVER_S = 1.0


def changed_files(cwd: Path, workspace: Path | None = None) -> list[str]:
    """Files changed in the work tree (staged, unstaged, untracked); [] outside git. With
    `workspace`, `cwd` may be a task worktree of its repository left by another run."""
    global _last
    state = work_state(cwd, workspace)
    _last = None if state is None else (cwd, time.monotonic(), state)
    return [] if state is None else state.files


def diff_digest(cwd: Path) -> str | None:
    """A fingerprint of the work tree's changes: equal digests mean no progress."""
    global _last
    last, _last = _last, None
    if last is not None and last[0] == cwd and time.monotonic() - last[1] < _HANDOVER_S:
        return last[2].digest
    state = work_state(cwd)
    return None if state is None else state.digest


def work_state(cwd: Path, workspace: Path | None = None) -> WorkState | None:
    """The work tree's changes from one `git status` (HEAD's commit, each change, untracked
    files by name) and the bytes of the changed tracked files; None outside git."""
    checkout = checkout_of(cwd, workspace)
    if checkout is None:
        return None
    proc = run_git(
        checkout,
        "status",
        "--porcelain=v2",
        "--branch",
        "--untracked-files=all",
        "--ignore-submodules=all",
        timeout_s=30,
        cap_bytes=5_000_000,
    )
    if proc.exit_code != 0:
        return None
    digest = hashlib.sha256(proc.stdout.encode())
    files = []
    for line in proc.stdout.splitlines():
        kind, path = line[:2], None
        if kind in ("1 ", "2 ", "u "):
            fields = {"1 ": 8, "2 ": 9, "u ": 10}[kind]
            path = line.split(" ", fields)[-1].split("\t", 1)[0]
            _digest_file(digest, cwd / path)  # its content, not only that it changed
        elif kind == "? ":
            path = line[2:]
        if path:
            files.append(path)
    return WorkState(sorted(files), digest.hexdigest())


def _digest_file(digest: Any, path: Path) -> None:
    # The file itself, never where a link of the agent's points (a FIFO would block).
    with open_data(path) as handle:
        if handle is not None:  # deleted, a link, not a file: no bytes
            digest.update(hashlib.file_digest(handle, "sha256").digest())


def _diff_text(cwd: Path) -> str | None:
    checkout = checkout_of(cwd)
    if checkout is None:
        return None
    diff = run_git(
        checkout,
        "diff",
        "--no-ext-diff",
        "--no-textconv",
        "HEAD",
        timeout_s=30,
        cap_bytes=5_000_000,
    )
    untracked = run_git(checkout, "ls-files", "--others", "--exclude-standard", timeout_s=30)
    return diff.stdout + "\0untracked:\n" + untracked.stdout


def save_diff(cwd: Path, path: Path) -> Path | None:
    """Write the uncommitted changes (and the untracked files' names) to `path`."""
    text = _diff_text(cwd)
    if text is None:
        return None
    atomic_write_text(path, text)
    return path


def delivery_problem(settings: Settings, source: str, use_worktree: bool) -> str | None:
    """Why a task of `source` cannot be delivered as configured here (it needs a worktree, and
    the workspace is no git repository); None when it can."""
    found = delivery_of(settings, source, use_worktree)
    if not in_worktree(found):
        return None
    checkout = main_checkout(settings.workspace)
    if checkout is not None and not run_git(checkout, "rev-parse", "--git-dir").exit_code:
        return None
    key = "[github] delivery" if source == "github" else "inbox_delivery"
    how = "--use-worktree" if use_worktree else f'{key} = "{found}"'
    return (
        f"{how} works in a git worktree, and {settings.workspace} is no git repository: "
        f'make it one (git init, a remote to push to), or set {key} = "in_place"'
    )
