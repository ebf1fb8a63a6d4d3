"""Task worktrees: worker's own record of each, made by hand as git lays them out, and their
commit, plumbing that moves only the task's branch, from the commit worker last saw there.

Every git call goes through `gitview.run_git` (the process chokepoint, a timeout, a view of the
repository that reads none of its configuration).
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worker.errors import UsageError
from worker.process.gitview import (
    Checkout,
    main_checkout,
    read_data,
    run_git,
    worktree_checkout,
)
from worker.process.platform.names import portable_name
from worker.process.proc import redact
from worker.state.fsutil import is_link, real_folder

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


# The worktrees this process made, as worker recorded them (see `checkout_of`).
_RECORD: dict[Path, Checkout] = {}


def checkout_of(cwd: Path, workspace: Path | None = None) -> Checkout | None:
    """Worker's record of the checkout at `cwd`: a worktree it made (or, with `workspace`, a
    task worktree of that repository), else the workspace's own checkout (None when `cwd/.git`
    is no folder: outside git, or a `.git` file, which worker never follows)."""
    if cwd in _RECORD:
        return _RECORD[cwd]
    if workspace is not None and cwd != workspace:
        return worktree_checkout(workspace, cwd, branch_name(cwd.name))
    return main_checkout(cwd)


def ensure_repo(path: Path) -> None:
    """Fail early (before any claim) when `--use-worktree` cannot work here."""
    checkout = main_checkout(path)
    marker = path / ".git"
    if checkout is None and marker.is_file() and not marker.is_symlink():
        raise UsageError(
            f"--use-worktree needs the repository's main checkout; {path} is a linked worktree "
            "or a submodule (its `.git` is a file, which worker does not follow): run worker "
            "in the main checkout"
        )
    if checkout is None or run_git(checkout, "rev-parse", "--git-dir", timeout_s=30).exit_code:
        raise UsageError(f"--use-worktree needs a git repository; {path} is not one")


def branch_name(task_id: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", task_id).strip("-.") or "task"
    return f"worker/{slug}"


def create_worktree(repo_dir: Path, worktrees: Path, task_id: str) -> tuple[Path, str]:
    """A worktree for the task on branch `worker/<task-id>` (the branch is reused when it
    exists; a worktree left at the same place is replaced).

    Made by hand as git lays worktrees out (`.git/worktrees/<name>/` with `HEAD`, `commondir`,
    `gitdir`; the tree's `.git` file), then filled from the branch through worker's view: no
    configuration of the repository's is read, so no filter of the agent's runs."""
    ensure_repo(repo_dir)
    main = main_checkout(repo_dir)
    assert main is not None  # ensure_repo said so
    branch = branch_name(task_id)
    path = worktrees / portable_name(branch.split("/", 1)[1])  # `CON` is no folder on Windows
    worktrees.mkdir(parents=True, exist_ok=True)
    admin = real_folder(main.common / "worktrees") / path.name  # a link there: the agent's
    _remove(path, admin)
    if run_git(main, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").exit_code:
        made = run_git(main, "update-ref", f"refs/heads/{branch}", "HEAD", "")
        _raise_on(made, task_id)
    admin.mkdir(parents=True)
    (admin / "commondir").write_text("../..\n", encoding="utf-8")
    (admin / "gitdir").write_text(f"{path / '.git'}\n", encoding="utf-8")
    (admin / "HEAD").write_text(f"ref: refs/heads/{branch}\n", encoding="utf-8")
    path.mkdir()
    (path / ".git").write_text(f"gitdir: {admin}\n", encoding="utf-8")
    checkout = Checkout(tree=path, common=main.common, gitdir=admin, branch=branch)
    _raise_on(run_git(checkout, "read-tree", "-u", "--reset", f"refs/heads/{branch}"), task_id)
    _RECORD[path] = checkout
    return path, branch


def _raise_on(proc: Any, task_id: str) -> None:
    if proc.exit_code != 0:
        said = proc.stderr_tail.strip() or proc.stdout.strip()
        raise UsageError(f"cannot create a worktree for {task_id}: {said}")


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
    """Commit what the agent left in the worktree to its branch (by `author`, a name and an
    address; else worker's bot identity), then remove the worktree; the branch stays. Returns
    True when a commit was made.

    The commit is plumbing: the work tree's files are added to an index of worker's own,
    over the branch's commit, and only `refs/heads/<task branch>` moves, from the commit
    worker read to the new one. The worktree's `HEAD`, index and `.git` file (the agent's to
    write) decide nothing."""
    checkout = checkout_of(path, repo_dir)
    _RECORD.pop(path, None)
    if checkout is None or checkout.branch is None:
        log.warning("could not commit the work in %s: %s is no repository", path, repo_dir)
        return False
    try:
        committed = _commit(checkout, checkout.branch, message, author)
    except OSError as exc:
        log.warning("could not commit the work in %s: %s", path, exc)
        return False  # keep the worktree: it holds unreported work
    _remove(path, checkout.common / "worktrees" / path.name)
    return committed


def drop_if_empty(repo_dir: Path, branch: str) -> bool:
    """Delete the task's branch when it holds nothing the checkout's HEAD lacks (the task
    changed nothing, as a maintenance run whose checks passed): no empty `worker/*` branch is
    left behind. True when deleted."""
    checkout = main_checkout(repo_dir)
    if checkout is None:
        return False
    ref = f"refs/heads/{branch}"
    held = run_git(checkout, "merge-base", "--is-ancestor", ref, "HEAD")
    if held.exit_code != 0:  # 1: it has commits of its own; else no such branch, no HEAD
        return False
    dropped = run_git(checkout, "update-ref", "-d", ref)
    if dropped.exit_code != 0:
        log.warning("could not delete the empty branch %s: %s", branch, dropped.stderr_tail)
        return False
    return True


def _commit(checkout: Checkout, branch: str, message: str, author: tuple[str, str] | None) -> bool:
    ref = f"refs/heads/{branch}"
    tip = _out(checkout, "rev-parse", "--verify", f"{ref}^{{commit}}")
    with tempfile.TemporaryDirectory(prefix="worker-index-") as folder:
        index = Path(folder) / "index"
        _out(checkout, "read-tree", tip, index=index)
        _out(checkout, "add", "-A", "--", ".", index=index)
        tree = _out(checkout, "write-tree", index=index)
    parents = ["-p", tip]
    merging = _merge_head(checkout)
    if merging:
        parents += ["-p", merging]
    elif tree == _out(checkout, "rev-parse", f"{tip}^{{tree}}"):
        return False  # nothing changed
    new = _out(checkout, "commit-tree", tree, *parents, "-m", message, extra_env=identity(author))
    _out(checkout, "update-ref", "-m", "worker: task commit", ref, new, tip)
    return True


def _merge_head(checkout: Checkout) -> str | None:
    """The merge worker began in the worktree (`bring_base_in`) and the agent concluded in the
    files: its other parent, when it names a commit."""
    raw = read_data(checkout.gitdir / "MERGE_HEAD") or b""
    head = raw.decode("ascii", "replace").split("\n", 1)[0].strip()
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", head):
        return None
    found = run_git(checkout, "cat-file", "-e", f"{head}^{{commit}}")
    return head if found.exit_code == 0 else None


def _out(
    checkout: Checkout,
    *args: str,
    extra_env: dict[str, str] | None = None,
    index: Path | None = None,
) -> str:
    proc = run_git(checkout, *args, timeout_s=300, extra_env=extra_env, index=index)
    if proc.exit_code != 0:
        said = (proc.stderr_tail.strip() or proc.stdout.strip())[-300:]
        raise OSError(f"git {args[0]}: {said or 'failed'}")
    return proc.stdout.strip()


def _remove(path: Path, admin: Path) -> None:
    """Remove a worktree and its git folder, never following a link out of them (nor
    through `.git/worktrees`, should the agent have made that a link)."""
    admin_reachable = not is_link(admin.parent, "remove a worktree's git folder")
    for folder in (path, admin) if admin_reachable else (path,):
        if is_link(folder, "remove files"):  # the link itself goes
            folder.unlink()
        elif folder.exists():
            shutil.rmtree(folder)
