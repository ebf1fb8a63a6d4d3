"""Every git process worker starts: without tokens, without hooks, a push with a one-shot key.

The agent can write the repository's `.git/` folder (hooks, config) in one task and wait for
worker's own git calls in the next one. So:

- every git process gets the scrubbed environment (`proc.child_env`: no GitHub token under any
  name); GitPython's `Repo` gets the same through `repo()`, whose environment blanks them;
- worker's own git calls run with `-c core.hooksPath=<the null device>`: no hook of the
  repository runs, and nothing can be planted in that "folder";
- `git push` authenticates through a credential helper written for that one push, in a
  private folder: it answers only for the expected host, hands out the token once and deletes
  it; the token is never on a command line or in git's environment, so no hook, filter or
  helper the repository names can read it;
- that push (https) runs from a scratch repository of worker's own (`scratch_repo`), never
  reading the workspace's `.git/config`: a proxy or a certificate authority the agent wrote
  there never sees the token; a remote turned to plain http gets no token at all.
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
from pathlib import Path
from typing import TYPE_CHECKING

from worker.process.proc import child_env, run_process
from worker.state.statedir import state_home

if TYPE_CHECKING:
    from git import Repo

# Config given on the command line wins over the repository's own `.git/config`.
SAFE_CONFIG = (
    "-c",
    f"core.hooksPath={os.devnull}",
    "-c",
    "core.fsmonitor=false",  # a command the repository's config could name
)


def git_argv(*args: str) -> list[str]:
    """`git <safe config> <args>` for `proc.run_process` (which gives it the scrubbed env)."""
    return ["git", *SAFE_CONFIG, *args]


def blanked_secrets() -> dict[str, str]:
    """Every variable `child_env` leaves out, set to "": GitPython can add to its children's
    environment but not remove from it."""
    kept = child_env()
    return {name: "" for name in os.environ if name not in kept}


def repo(path: Path) -> Repo:
    """A GitPython `Repo` whose git processes run without tokens and without hooks."""
    from git import Repo

    found = Repo(path)
    found.git.update_environment(**blanked_secrets())
    found.git.set_persistent_git_options(c=[SAFE_CONFIG[1], SAFE_CONFIG[3]])
    return found


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
def scratch_repo(workspace: Path, branch: str, env: dict[str, str]) -> Iterator[Path]:
    """A bare repository of worker's own, in a private temporary folder, holding `branch`: an
    authenticated push runs from there.

    Nothing is copied: the scratch repository borrows the workspace's objects (git's
    `objects/info/alternates`) and its one ref points at the branch's commit. A shallow
    workspace's boundary (`shallow`) comes along, so the push stops where its history does."""
    with tempfile.TemporaryDirectory(prefix="worker-push-repo-") as folder:
        scratch = Path(folder)
        run_process(git_argv("init", "-q", "--bare", folder), cwd=scratch, timeout_s=60, env=env)
        common = _rev_parse(workspace, env, "--git-common-dir")
        commit = _rev_parse(workspace, env, "--verify", "--end-of-options", f"{branch}^{{commit}}")
        if common and commit:
            store = (workspace / common).resolve()
            alternates = scratch / "objects" / "info" / "alternates"
            alternates.write_text(f"{(store / 'objects').as_posix()}\n", encoding="utf-8")
            if (store / "shallow").is_file():
                shutil.copyfile(store / "shallow", scratch / "shallow")
            update = git_argv("update-ref", f"refs/heads/{branch}", commit)
            run_process(update, cwd=scratch, timeout_s=60, env=env)
        yield scratch  # without the branch (not a commit here) the push names what is missing


def _rev_parse(workspace: Path, env: dict[str, str], *args: str) -> str:
    found = run_process(git_argv("rev-parse", *args), cwd=workspace, timeout_s=60, env=env)
    return found.stdout.strip() if found.exit_code == 0 else ""


def push_url(workspace: Path, remote: str, env: dict[str, str]) -> str:
    """The URL `git push <remote>` would use (`remote` itself when it names no remote)."""
    found = run_process(
        git_argv("remote", "get-url", "--push", remote), cwd=workspace, timeout_s=60, env=env
    )
    return found.stdout.strip() if found.exit_code == 0 and found.stdout.strip() else remote


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
