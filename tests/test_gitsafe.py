"""git for worker's own calls: the push credential is one-shot, bound to its host and never on
a command line; a hook the agent planted never runs on a push."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import git
from worker.process.gitsafe import git_argv, merge_from, push_credentials, scratch_repo
from worker.process.gitview import Checkout, main_checkout
from worker.process.workspace_git import create_worktree, finish_worktree, identity
from worker.sources.github.delivery import git_host, push_branch
from worker.sources.github.settings import GitHubSettings

TOKEN = "ghs_push0token0value0000000000000000000"


def fill(config: list[str], host: str, cwd: Path) -> str:
    """What `git credential fill` gets for `host` with worker's helper (no prompt)."""
    return _ask(config, f"protocol=https\nhost={host}\n\n", cwd)


def fill_url(config: list[str], url: str, cwd: Path) -> str:
    """What `git credential fill` gets for a remote's URL: git splits it into protocol and
    host (with the port when the URL has one) exactly as it does for a push."""
    return _ask(config, f"url={url}\n\n", cwd)


def _ask(config: list[str], question: str, cwd: Path) -> str:
    result = subprocess.run(
        git_argv(*config, "credential", "fill"),
        input=question,
        cwd=cwd,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": ""},
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout


def test_the_push_credential_is_one_shot_and_only_for_its_host(tmp_path: Path) -> None:
    with push_credentials(TOKEN, "github.com") as config:
        assert TOKEN not in " ".join(config)  # never on a command line
        helper = Path(config[-1].split("=", 1)[1])
        assert (helper.parent.stat().st_mode & 0o077) == 0  # a folder of this user's only
        assert f"password={TOKEN}" not in fill(config, "evil.example", tmp_path)
        assert f"password={TOKEN}" in fill(config, "github.com", tmp_path)
        assert TOKEN not in fill(config, "github.com", tmp_path)  # handed out once
    assert not helper.parent.exists()


def test_the_host_comes_from_the_api_address() -> None:
    assert git_host(GitHubSettings()) == "github.com"
    enterprise = GitHubSettings(base_url="https://git.example.com/api/v3")
    assert git_host(enterprise) == "git.example.com"
    on_its_port = GitHubSettings(base_url="https://git.example.com:8443/api/v3")
    assert git_host(on_its_port) == "git.example.com:8443"


@pytest.mark.parametrize(
    ("api", "remote", "given"),
    [
        # GitHub Enterprise on a port of its own: git asks for `host:port`.
        ("https://git.example.com:8443/api/v3", "https://git.example.com:8443/a/b.git", True),
        # The same host on another port is another server: no token for it.
        ("https://git.example.com:8443/api/v3", "https://git.example.com:9999/a/b.git", False),
        ("https://git.example.com:8443/api/v3", "https://git.example.com/a/b.git", False),
        # https's own port, written or not, is the same host.
        ("https://git.example.com:443/api/v3", "https://git.example.com/a/b.git", True),
        ("https://git.example.com/api/v3", "https://git.example.com:443/a/b.git", True),
        ("https://api.github.com", "https://github.com/a/b.git", True),
        ("https://api.github.com", "https://github.com:8443/a/b.git", False),
    ],
)
def test_the_push_credential_matches_the_remote_host_and_port(
    tmp_path: Path, api: str, remote: str, given: bool
) -> None:
    host = git_host(GitHubSettings(base_url=api))
    with push_credentials(TOKEN, host) as config:
        answered = f"password={TOKEN}" in fill_url(config, remote, tmp_path)
    assert answered is given, f"{api} / {remote}: helper bound to {host!r}"


def test_a_planted_pre_push_hook_does_not_run_on_worker_push(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    origin, ws = tmp_path / "origin.git", tmp_path / "ws"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    (ws / "README.md").write_text("hello\n")
    git(ws, "add", "-A")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    git(ws, "remote", "add", "origin", str(origin))
    dump = tmp_path / "pre-push-env"
    hook = ws / ".git" / "hooks" / "pre-push"
    hook.write_text(f'#!/bin/sh\nenv > "{dump}"\n')
    hook.chmod(0o755)
    assert push_branch(GitHubSettings(remote=str(origin)), ws, "main", TOKEN) is None
    assert git(origin, "rev-parse", "main") == git(ws, "rev-parse", "main")
    assert not dump.exists()
    git(ws, "push", "-q", "origin", "main:other")  # the hook is real: plain git runs it
    assert dump.exists()


def _main(ws: Path) -> Checkout:
    found = main_checkout(ws)
    assert found is not None
    return found


def _history(ws: Path, commits: int) -> None:
    git(ws, "init", "-q", "-b", "main")
    for n in range(commits):
        (ws / "file.txt").write_text(f"version {n}\n")
        git(ws, "add", "-A")
        git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", f"c{n}")


def _objects_in(repo: Path) -> list[Path]:
    """Loose objects and packs stored in `repo` itself (not borrowed through alternates)."""
    objects = repo / "objects"
    return [p for p in objects.rglob("*") if p.is_file() and p.parent.name != "info"]


def test_the_scratch_repository_borrows_the_workspace_objects_and_copies_none(
    tmp_path: Path,
) -> None:
    """The authenticated push runs from a scratch repository: it holds the branch at the
    workspace's commit and pushes the whole history, yet stores no object of its own."""
    ws, origin = tmp_path / "ws", tmp_path / "origin.git"
    ws.mkdir()
    _history(ws, 5)
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    with scratch_repo(_main(ws), "main", dict(os.environ)) as scratch:
        assert _objects_in(scratch) == []
        assert git(scratch, "rev-parse", "refs/heads/main") == git(ws, "rev-parse", "main")
        git(scratch, "push", "-q", str(origin), "main:refs/heads/main")
    assert git(origin, "rev-list", "--count", "main").strip() == "5"
    assert not scratch.exists()


def test_a_shallow_workspace_pushes_its_new_commit_through_the_scratch_repository(
    tmp_path: Path,
) -> None:
    """A workspace cloned with `--depth 1` lacks the older history: the scratch repository
    keeps the workspace's shallow boundary, so the push sends only the new commit."""
    upstream, origin, ws = tmp_path / "upstream", tmp_path / "origin.git", tmp_path / "ws"
    upstream.mkdir()
    _history(upstream, 3)
    git(tmp_path, "clone", "-q", "--bare", str(upstream), str(origin))
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(ws))
    (ws / "new.txt").write_text("agent's work\n")
    git(ws, "add", "-A")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "work")
    git(ws, "branch", "agent/work")
    with scratch_repo(_main(ws), "agent/work", dict(os.environ)) as scratch:
        git(scratch, "push", "-q", str(origin), "agent/work:refs/heads/agent/work")
    assert git(origin, "rev-parse", "agent/work") == git(ws, "rev-parse", "HEAD")
    assert git(origin, "rev-list", "--count", "agent/work").strip() == "4"


def test_a_branch_that_is_no_commit_leaves_the_scratch_repository_empty(tmp_path: Path) -> None:
    """The push from there then fails naming the branch, rather than pushing something else."""
    ws = tmp_path / "ws"
    ws.mkdir()
    _history(ws, 1)
    with scratch_repo(_main(ws), "no-such-branch", dict(os.environ)) as scratch:
        refs = git(scratch, "for-each-ref")
        pushed = subprocess.run(
            ["git", "push", str(tmp_path), "no-such-branch"],
            cwd=scratch,
            capture_output=True,
            text=True,
            check=False,
        )
    assert refs == ""
    assert pushed.returncode != 0 and "no-such-branch" in pushed.stderr


def test_a_conflicted_merge_state_replaces_a_link_in_the_worktree_git_folder(
    tmp_path: Path,
) -> None:
    """The merge state worker copies into a worktree's git folder (MERGE_HEAD, MERGE_MSG) is
    written as files of its own: a link left at one of those names (the `.git` is shared with
    other agents' tasks) is replaced, and the file it points to is left as it was."""
    ws = tmp_path / "ws"
    ws.mkdir()
    _history(ws, 1)
    tree, branch = create_worktree(ws, tmp_path / "worktrees", "task-1")
    (ws / "file.txt").write_text("main's\n")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "main moved")
    (tree / "file.txt").write_text("the task's\n")
    git(tree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "task")
    outside = tmp_path / "operators-file"
    outside.write_text("the operator's\n")
    admin = ws / ".git" / "worktrees" / tree.name
    (admin / "MERGE_MSG").symlink_to(outside)
    checkout = Checkout(tree=tree, common=ws / ".git", gitdir=admin, branch=branch)
    merged = merge_from(checkout, ws, "main", identity())
    assert not merged.clean and merged.conflicts == ["file.txt"]
    assert outside.read_text() == "the operator's\n"
    assert not (admin / "MERGE_MSG").is_symlink()
    assert "Merge branch 'main'" in (admin / "MERGE_MSG").read_text()


def test_a_worktrees_folder_made_a_link_is_not_written_or_removed_through(
    tmp_path: Path,
) -> None:
    """An agent of an in-place task can write `.git`: `.git/worktrees` made a link to a
    folder of the operator's. Making and finishing a task worktree neither writes there nor
    removes anything there; worker's own `.git/worktrees` is a folder again."""
    ws = tmp_path / "ws"
    ws.mkdir()
    _history(ws, 1)
    operators = tmp_path / "operators"
    (operators / "task-1").mkdir(parents=True)
    (operators / "task-1" / "keep.txt").write_text("the operator's\n")
    (ws / ".git" / "worktrees").symlink_to(operators, target_is_directory=True)
    tree, _ = create_worktree(ws, tmp_path / "worktrees", "task-1")
    assert not (ws / ".git" / "worktrees").is_symlink()
    (tree / "file.txt").write_text("the task's\n")
    (ws / ".git" / "worktrees").rename(tmp_path / "moved-aside")
    (ws / ".git" / "worktrees").symlink_to(operators, target_is_directory=True)
    finish_worktree(ws, tree, "worker: task-1")
    assert sorted(p.name for p in operators.rglob("*")) == ["keep.txt", "task-1"]
    assert (operators / "task-1" / "keep.txt").read_text() == "the operator's\n"
