"""Every git process worker starts: without tokens, without hooks, a push with a one-shot key.

The agent can write the repository's `.git/` folder (hooks, config) in one task and wait for
worker's own git calls in the next one. So:

- every git process gets the scrubbed environment (`proc.child_env`: no GitHub token under any
  name), and on an agent's repository it reads none of the repository's configuration
  (`worker.process.gitview`: a view of worker's own);
- worker's own git calls run with `-c core.hooksPath=<the null device>`: no hook of the
  repository runs, and nothing can be planted in that "folder";
- `git push` authenticates through a credential helper written for that one push, in a
  private folder: it answers only for the expected host, hands out the token once and deletes
  it; the token is never on a command line or in git's environment, so no hook, filter or
  helper the repository names can read it;
- a push (and the fetch of a pull request's base) runs from a scratch repository of worker's
  own (`scratch_repo`), to the URL worker's settings name, never to a remote of the
  workspace's `.git/config`: a proxy, a certificate authority, a `pushurl`, a `receivepack`
  or an `insteadOf` the agent wrote there is never read.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from worker.process.gitview import MERGE_STATE, Checkout, git_argv, read_data, run_git, view
from worker.process.proc import run_process
from worker.state.statedir import state_home

__all__ = ["git_argv", "merge_from", "push_credentials", "scratch_repo"]


@contextlib.contextmanager
def push_credentials(token: str, host: str) -> Iterator[list[str]]:
    """The `-c` options that make one `git push` authenticate to `host` with `token`.

    The helper script and the token file live in a folder only this user can enter
    (mkdtemp: mode 0700) under worker's state home, which the agent's box hides (never the
    shared /tmp), the token file is readable by its owner only, and the helper deletes it
    when it hands it out: a second ask finds nothing."""
    home = state_home()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder = Path(tempfile.mkdtemp(prefix="push-", dir=home))
    try:
        secret = folder / "token"
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(token)
        helper = folder / "credential-helper"
        helper.write_text(_helper_script(secret, host), encoding="utf-8")
        helper.chmod(stat.S_IRWXU)
        # An empty helper first drops the helpers of the user's and the repository's config.
        yield ["-c", "credential.helper=", "-c", f"credential.helper={_quoted(helper)}"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def scratch_repo(checkout: Checkout, branch: str, env: dict[str, str]) -> Iterator[Path]:
    """A bare repository of worker's own, in a private temporary folder, holding `branch`: a
    push runs from there.

    Nothing is copied: the scratch repository borrows the workspace's objects (git's
    `objects/info/alternates`) and its one ref points at the branch's commit. A shallow
    workspace's boundary (`shallow`) comes along, so the push stops where its history does."""
    with tempfile.TemporaryDirectory(prefix="worker-push-repo-") as folder:
        scratch = Path(folder)
        run_process(git_argv("init", "-q", "--bare", folder), cwd=scratch, timeout_s=60, env=env)
        found = run_git(
            checkout, "rev-parse", "--verify", "--end-of-options", f"{branch}^{{commit}}"
        )
        commit = found.stdout.strip() if found.exit_code == 0 else ""
        if commit:
            alternates = scratch / "objects" / "info" / "alternates"
            objects = (checkout.common / "objects").resolve()
            alternates.write_text(f"{objects.as_posix()}\n", encoding="utf-8")
            shallow = checkout.common / "shallow"
            if shallow.is_file() and not shallow.is_symlink():
                shutil.copyfile(shallow, scratch / "shallow")
            update = git_argv("update-ref", f"refs/heads/{branch}", commit)
            run_process(update, cwd=scratch, timeout_s=60, env=env)
        yield scratch  # without the branch (not a commit here) the push names what is missing


@dataclass(frozen=True)
class Merged:
    """What `merge_from` did: merged cleanly, left conflicts in `conflicts`, or failed."""

    clean: bool
    conflicts: list[str]
    said: str  # git's words when it did not merge cleanly


def merge_from(checkout: Checkout, source: Path, base: str, identity: dict[str, str]) -> Merged:
    """Merge branch `base` of the repository at `source` (a scratch repository of worker's)
    into the worktree's branch, as `identity` (git's author and committer variables). A merge
    that stops on conflicts stays in progress: its state goes to the worktree's git folder,
    for the agent (or worker's commit) to conclude."""
    with view(checkout) as env:
        fetched = run_process(
            git_argv("fetch", "-q", str(source), base), cwd=checkout.tree, timeout_s=300, env=env
        )
        if fetched.exit_code != 0:
            return Merged(False, [], fetched.stderr_tail.strip()[-300:])
        merge = git_argv("merge", "--no-edit", "-m", f"Merge branch '{base}'", "FETCH_HEAD")
        merged = run_process(merge, cwd=checkout.tree, timeout_s=300, env={**env, **identity})
        if merged.exit_code == 0:
            return Merged(True, [], "")
        listed = git_argv("diff", "--name-only", "--diff-filter=U")
        files = run_process(listed, cwd=checkout.tree, timeout_s=60, env=env).stdout.split()
        if files and checkout.gitdir.is_dir() and not checkout.gitdir.is_symlink():
            for name in MERGE_STATE:
                data = read_data(Path(env["GIT_DIR"]) / name)
                if data is not None:
                    _write_own(checkout.gitdir / name, data)
    said = merged.stderr_tail.strip()[-300:] or merged.stdout.strip()[-300:]
    return Merged(False, files, said)


def _write_own(path: Path, data: bytes) -> None:
    """`data` in a file of worker's at `path`: whatever stands there (a link another agent
    could have left in the shared `.git`) is removed first, never written through."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(path, flags, 0o644), "wb") as handle:
        handle.write(data)


def _helper_script(secret: Path, host: str) -> str:
    # git's credential protocol: `get` on stdin with `host=...` lines; answer on stdout.
    path = shlex.quote(str(secret))
    return (
        "#!/bin/sh\n"
        '[ "$1" = get ] || exit 0\n'
        "asked=''\n"
        'while IFS= read -r line && [ -n "$line" ]; do\n'
        '  case "$line" in host=*) asked="${line#host=}";; esac\n'
        "done\n"
        'asked="${asked%:443}"\n'  # https's own port, written out, is the same host
        f'[ "$asked" = {shlex.quote(host)} ] || exit 0\n'
        f"[ -f {path} ] || exit 0\n"
        "echo username=x-access-token\n"
        f'printf "password=%s\\n" "$(cat {path})"\n'
        f"rm -f {path}\n"
    )


def _quoted(helper: Path) -> str:
    text = str(helper)
    if sys.platform == "win32":  # pragma: no cover - git for Windows runs helpers with sh
        text = text.replace("\\", "/")
    return shlex.quote(text)
