"""What a finished task changed, from git: files, lines and a diff excerpt for the reviewers.

With a task branch (worktrees) it is the branch against its merge base with HEAD; without one,
the uncommitted changes of the workspace. Outside git, or on any git error, nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from worker.process.gitview import Checkout, main_checkout, run_git


@dataclass
class Changes:
    files: list[str] = field(default_factory=list)
    lines: int = 0  # added + removed
    diff: str = ""  # an excerpt, capped


def _git(checkout: Checkout, *args: str) -> str | None:
    proc = run_git(checkout, *args, cap_bytes=400_000)
    return proc.stdout if proc.exit_code == 0 else None


def task_changes(workspace: Path, branch: str | None, max_chars: int) -> Changes:
    checkout = main_checkout(workspace)
    if checkout is None:
        return Changes()
    if branch:
        base = _git(checkout, "merge-base", "HEAD", branch)
        if not base:
            return Changes()
        spec = [f"{base.strip()}..{branch}"]
    else:
        spec = ["HEAD"]
    numstat = _git(checkout, "diff", "--no-ext-diff", "--no-textconv", "--numstat", *spec)
    if numstat is None:
        return Changes()
    changes = Changes()
    for line in numstat.splitlines():
        parts = line.split("\t", 2)
        if len(parts) != 3:
            continue
        added, removed, path = parts
        changes.files.append(path)
        changes.lines += int(added) if added.isdigit() else 0
        changes.lines += int(removed) if removed.isdigit() else 0
    if max_chars > 0 and changes.files:
        patch = _git(checkout, "diff", "--no-ext-diff", "--no-textconv", *spec) or ""
        changes.diff = patch[:max_chars] + (
            "\n[... diff cut ...]" if len(patch) > max_chars else ""
        )
    return changes
