"""worker's git remote for a task's branch: where it pushes and fetches (`remote_url`, never a
remote of the agent's `.git/config`), the push from a scratch repository of worker's own,
the pull request's base merged in before a conflict is resolved, and the host a token may
authenticate to.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from worker.process.gitsafe import git_argv, merge_from, push_credentials, scratch_repo
from worker.process.gitview import base_env, main_checkout, worktree_checkout
from worker.process.proc import redact, run_process
from worker.process.workspace_git import identity
from worker.sources.github.authorship import commit_identity
from worker.sources.github.settings import GitHubSettings


def remote_url(settings: GitHubSettings, repo: str | None) -> str | None:
    """Where worker pushes and fetches: `[github] remote` when it is a URL or a path, else (a
    remote's name, `origin` by default) the issue's repository on the GitHub host, over https.
    Never a remote of the workspace's `.git/config`, which the agent can write."""
    remote = settings.remote
    if "://" in remote or re.match(r"[^/:]+@[^/:]+:", remote) or Path(remote).is_absolute():
        return remote
    return f"https://{git_host(settings)}/{repo}.git" if repo else None


def push_branch(
    settings: GitHubSettings,
    workspace: Any,
    branch: str,
    token: str | None,
    delete: bool = False,
    *,
    repo: str | None = None,
) -> str | None:
    """Push `branch` to worker's remote (`remote_url`; `delete`: delete it there); returns an
    error text, None when pushed. The push runs from a scratch repository of worker's own; the
    token reaches git only through a one-shot credential helper (`worker.process.gitsafe`)."""
    env = base_env()
    url = remote_url(settings, repo)
    checkout = main_checkout(Path(workspace))
    if url is None or checkout is None:
        return f"git push {branch}: no repository to push to; set [github] remote to its URL"
    if token and url.lower().startswith("http://"):
        return redact(f"git push {url} {branch}: refused, the token never goes over http")
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(scratch_repo(checkout, branch, env))
        config = _credentials(stack, settings, url, token)
        refspec = f":refs/heads/{branch}" if delete else f"{branch}:refs/heads/{branch}"
        args = ["push", url, refspec]
        proc = run_process(git_argv(*config, *args), cwd=scratch, timeout_s=300, env=env)
    if proc.exit_code == 0:
        return None
    tail = proc.stderr_tail.strip().splitlines()[-3:] or ["(no output)"]
    return redact(f"git push {url} {branch} failed: {' / '.join(tail)}")


def _credentials(
    stack: contextlib.ExitStack[Any], settings: GitHubSettings, url: str, token: str | None
) -> list[str]:
    """git's `-c` options for the one-shot credential helper, for the call `stack` holds:
    over https with a token only (never over plain http)."""
    if token and url.lower().startswith("https://"):
        return stack.enter_context(push_credentials(token, git_host(settings)))
    return []


def bring_base_in(
    settings: GitHubSettings,
    cwd: Path,
    base: str,
    token: str | None,
    *,
    workspace: Path,
    branch: str,
    repo: str | None = None,
) -> str:
    """Merge the pull request's base into its branch checked out at `cwd` (a task worktree of
    `workspace`), before the agent resolves a conflict; what happened, in one sentence for
    the agent's prompt. Conflicts stay in the files with their markers (the merge is in
    progress: the agent's commit, or worker's at the end of the task, concludes it).

    The base is fetched from worker's remote (`remote_url`) into a scratch repository of
    worker's own (with the one-shot credential over https), then merged through worker's view
    of the worktree: no configuration of the agent's is read (no merge driver, no filter)."""
    env = base_env()
    url = remote_url(settings, repo)
    checkout = worktree_checkout(workspace, cwd, branch)
    if url is None or checkout is None:
        return "worker could not fetch the base: set [github] remote to the repository's URL"
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="worker-fetch-"))
        run_process(git_argv("init", "-q", "--bare", scratch), cwd=cwd, timeout_s=60, env=env)
        config = _credentials(stack, settings, url, token)
        ref = f"+refs/heads/{base}:refs/heads/{base}"
        got = run_process(
            git_argv(*config, "fetch", "-q", url, ref), cwd=Path(scratch), timeout_s=300, env=env
        )
        if got.exit_code != 0:
            return redact(f"worker could not fetch `{base}`: {got.stderr_tail.strip()[-300:]}")
        author = commit_identity(None, settings)  # no client here: the setting, else the bot
        merged = merge_from(checkout, Path(scratch), base, identity(author))
    if merged.clean:
        return f"worker merged the latest `{base}` into the branch; it merged cleanly."
    if not merged.conflicts:  # not a conflict (unrelated histories, a dirty tree)
        return redact(f"worker could not merge `{base}` into the branch: {merged.said}")
    files = ", ".join(merged.conflicts[:20])
    return (
        f"worker merged the latest `{base}` into the branch; these files conflict and hold "
        f"conflict markers for you to resolve: {files}."
    )


def git_host(settings: GitHubSettings) -> str:
    """The host a push may authenticate to, as git's credential protocol names it: github.com
    for the public API, else the Enterprise host of `base_url` (`https://HOST/api/v3`), with
    its port when it has one other than https's 443 (git asks for `HOST:PORT` then)."""
    parts = urlsplit(settings.base_url)
    host = parts.hostname or ""
    if host == "api.github.com":
        return "github.com"
    return f"{host}:{parts.port}" if parts.port not in (None, 443) else host
