"""Git helpers for the workspace: progress between iterations and task worktrees.

GitPython is imported lazily (it is heavy, and `worker --help` must stay fast).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worker.config import Settings
from worker.delivery import delivery_of, in_worktree
from worker.process.gitsafe import git_argv, repo
from worker.process.platform.names import portable_name
from worker.process.proc import redact, run_process

if TYPE_CHECKING:
    from worker.results import TaskResult

log = logging.getLogger(__name__)

# Commits made by worker say so, whatever the machine's git identity is: by default a bot name
# at a `.invalid` address (RFC 2606), which credits no account anywhere.
BOT_IDENTITY = ("worker", "noreply@worker.invalid")


def identity(author: tuple[str, str] | None = None) -> dict[str, str]:
    """git's variables for a commit by `author` (name, address), committed by the same."""
    name, email = author or BOT_IDENTITY
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


@dataclass(frozen=True)
class WorkState:
    """What the work tree holds beyond HEAD, from one `git status`."""

    files: list[str]  # changed, staged, deleted and untracked files, sorted
    digest: str  # equal digests mean no progress: HEAD, the status, the changed files' bytes


# A supervised iteration asks for the changed files and then the digest (worker/run/loop.py): both
# come from one `git status` taken for the first and handed to the second.
_last: tuple[Path, float, WorkState] | None = None
_HANDOVER_S = 1.0


def changed_files(cwd: Path) -> list[str]:
    """Files changed in the work tree (staged, unstaged, untracked); [] outside git."""
    global _last
    state = work_state(cwd)
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


def work_state(cwd: Path) -> WorkState | None:
    """The work tree's changes from one `git status` (HEAD's commit, each change, untracked
    files by name) and the bytes of the changed tracked files; None outside git."""
    if not (cwd / ".git").exists():
        return None
    proc = run_process(
        git_argv("status", "--porcelain=v2", "--branch", "--untracked-files=all"),
        cwd=cwd,
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
    with contextlib.suppress(OSError), open(path, "rb") as handle:  # deleted: no bytes
        digest.update(hashlib.file_digest(handle, "sha256").digest())


def _diff_text(cwd: Path) -> str | None:
    if not (cwd / ".git").exists():
        return None
    diff = run_process(
        git_argv("diff", "--no-ext-diff", "HEAD"), cwd=cwd, timeout_s=30, cap_bytes=5_000_000
    )
    untracked = run_process(
        git_argv("ls-files", "--others", "--exclude-standard"), cwd=cwd, timeout_s=30
    )
    return diff.stdout + "\0untracked:\n" + untracked.stdout


def save_diff(cwd: Path, path: Path) -> Path | None:
    """Write the uncommitted changes (and the untracked files' names) to `path`."""
    text = _diff_text(cwd)
    if text is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def ensure_repo(path: Path) -> None:
    """Fail early (before any claim) when `--use-worktree` cannot work here."""
    from worker.errors import UsageError

    proc = run_process(git_argv("rev-parse", "--git-dir"), cwd=path, timeout_s=30)
    if proc.exit_code != 0:
        raise UsageError(f"--use-worktree needs a git repository; {path} is not one")


def delivery_problem(settings: Settings, source: str, use_worktree: bool) -> str | None:
    """Why a task of `source` cannot be delivered as configured here (it needs a worktree, and
    the workspace is no git repository); None when it can."""
    found = delivery_of(settings, source, use_worktree)
    if not in_worktree(found):
        return None
    proc = run_process(git_argv("rev-parse", "--git-dir"), cwd=settings.workspace, timeout_s=30)
    if proc.exit_code == 0:
        return None
    key = "[github] delivery" if source == "github" else "inbox_delivery"
    how = "--use-worktree" if use_worktree else f'{key} = "{found}"'
    return (
        f"{how} works in a git worktree, and {settings.workspace} is no git repository: "
        f'make it one (git init, a remote to push to), or set {key} = "in_place"'
    )


def branch_name(task_id: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", task_id).strip("-.") or "task"
    return f"worker/{slug}"


def create_worktree(repo_dir: Path, worktrees: Path, task_id: str) -> tuple[Path, str]:
    """A worktree for the task on branch `worker/<task-id>` (reused when it exists)."""
    from git.exc import GitCommandError, InvalidGitRepositoryError, NoSuchPathError

    from worker.errors import UsageError

    try:
        main = repo(repo_dir)
    except (InvalidGitRepositoryError, NoSuchPathError) as exc:
        raise UsageError(f"--use-worktree needs a git repository; {repo_dir} is not one") from exc
    branch = branch_name(task_id)
    path = worktrees / portable_name(branch.split("/", 1)[1])  # `CON` is no folder on Windows
    worktrees.mkdir(parents=True, exist_ok=True)
    try:
        if path.exists():
            main.git.worktree("remove", "--force", str(path))
        if branch in [head.name for head in main.heads]:
            main.git.worktree("add", str(path), branch)
        else:
            main.git.worktree("add", "-b", branch, str(path))
    except GitCommandError as exc:
        raise UsageError(f"cannot create a worktree for {task_id}: {exc.stderr.strip()}") from exc
    return path, branch


def commit_message(task_id: str, title: str, result: TaskResult | None, done: bool) -> str:
    """The commit's subject from the agent's summary (its STATUS reason), its body the task
    and what the round cost; a crash leaves the work as "work in progress"."""
    reason = (result.reason if result is not None else "").strip().splitlines()
    wip = f"worker: {task_id} (work in progress): {title[:60]}"
    subject = reason[0][:72] if reason and done else wip
    lines = [subject, "", f"Task: {title[:200]}"]
    if result is not None:
        lines.append(
            f"Agent: {len(result.iterations)} iteration(s) in "
            f"{' -> '.join(result.modes) or '-'}, ${result.cost_usd:.4f}"
        )
    return redact("\n".join(lines))


def finish_worktree(
    repo_dir: Path, path: Path, message: str, author: tuple[str, str] | None = None
) -> bool:
    """Commit what the agent left in the worktree (by `author`, a name and an address; else
    worker's bot identity), then remove the worktree; the branch stays. Returns True when a
    commit was made."""
    from git.exc import GitCommandError

    committed = False
    try:
        tree = repo(path)
        if tree.is_dirty(untracked_files=True):
            tree.git.add("-A")
            with tree.git.custom_environment(**identity(author)):
                tree.git.commit("-m", message, "--no-verify")
            committed = True
    except GitCommandError as exc:
        log.warning("could not commit the work in %s: %s", path, exc)
        return False  # keep the worktree: it holds unreported work
    try:
        repo(repo_dir).git.worktree("remove", "--force", str(path))
    except GitCommandError as exc:
        log.warning("could not remove worktree %s: %s", path, exc)
    return committed
