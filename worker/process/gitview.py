"""Git as data: worker's git runs on a repository the agent wrote without reading its config.

The agent can write the working tree and, in the tree, the whole `.git` folder; in a task
worktree, the worktree's own git folder (`HEAD`, `index`, `commondir`, `config.worktree`) and
its `.git` file. Git's configuration names programs under open-ended keys (`filter.<x>.clean`,
`diff.<x>.textconv`, `merge.<x>.driver`, `remote.<x>.receivepack`, `gpg.<format>.program`,
...) and pulls in other files (`include.path`, `includeIf`); overriding the dangerous keys by
name can never be complete. So worker's git never reads the repository's configuration:

- every call runs with `GIT_DIR` set to a private folder of worker's own (a *view*, mode
  0700, made for the call and removed after it). Its `config` is worker's: a few data keys
  copied from the repository's (format version, object format, file modes, case, line
  endings: read as data with `--no-includes`), nothing else. Its `HEAD` is worker's too:
  the task's branch for a worktree; for the workspace itself, the repository's `HEAD` read
  as data (a ref name or a commit, nothing more). `refs` and `packed-refs` are links to the
  repository's (refs are data; a commit moves only the ref worker names, see
  `workspace_git.finish_worktree`), objects come through `GIT_OBJECT_DIRECTORY`;
- the work tree, the index and the object store come from worker's record (`Checkout`):
  the workspace's `.git` must be a real folder, and a task worktree's git folder is the one
  worker made, never what a `.git` file or `commondir` says;
- the user's and the system's git configuration still apply: they are the operator's, out
  of the agent's reach (the box keeps the home folder read-only), and hold what the operator
  chose (an identity, Git LFS's filter);
- submodules are never entered (`submodule.recurse=false`, `diff.ignoreSubmodules=all`): a
  submodule's git folder holds a configuration of the agent's;
- replace refs are ignored (`GIT_NO_REPLACE_OBJECTS`) and only known transports are allowed
  (`GIT_ALLOW_PROTOCOL`, which wins over any `protocol.*.allow`): no `ext::` command.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from io import BufferedReader
from pathlib import Path

from worker.process.proc import ProcResult, child_env, run_process

if sys.platform == "win32":  # pragma: no cover - junctions stand for links there
    import _winapi

log = logging.getLogger(__name__)

# The keys of the repository's own config that worker's view keeps: what the bytes on disk mean,
# never a program, a path or a remote. Each with the values it may take.
_KEPT = {
    "core.repositoryformatversion": {"0", "1"},
    "extensions.objectformat": {"sha1", "sha256"},
    "core.filemode": {"true", "false"},
    "core.symlinks": {"true", "false"},
    "core.ignorecase": {"true", "false"},
    "core.precomposeunicode": {"true", "false"},
    "core.autocrlf": {"true", "false", "input"},
    "core.eol": {"lf", "crlf", "native"},
}
# Worker's own settings in every view: no hook, no monitor, no signing, no background upkeep,
# no submodule entered, no reflog written into the view.
_OWN = (
    ("core", "bare", "false"),
    ("core", "logallrefupdates", "false"),
    ("core", "hookspath", os.devnull),
    ("core", "fsmonitor", "false"),
    ("core", "untrackedcache", "false"),
    ("gc", "auto", "0"),
    ("maintenance", "auto", "false"),
    ("commit", "gpgsign", "false"),
    ("tag", "gpgsign", "false"),
    ("submodule", "recurse", "false"),
    ("diff", "ignoresubmodules", "all"),
    ("fetch", "recursesubmodules", "false"),
)
_CONFIG_CAP = 1 << 20
_HEAD = re.compile(r"ref: (refs/[A-Za-z0-9._/-]+)|([0-9a-f]{40}|[0-9a-f]{64})")
GIT_TIMEOUT_S = 60.0
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # pragma: no branch - Windows has no links to follow here


@dataclass(frozen=True)
class Checkout:
    """Worker's own record of a checkout: where its files are and which git folders it uses."""

    tree: Path  # the work tree
    common: Path  # the repository's git folder: objects and refs (its config is never read)
    gitdir: Path  # the checkout's own git folder: its index, a merge in progress
    branch: str | None = None  # HEAD as worker means it (a task's branch); None: HEAD as data

    @property
    def index(self) -> Path:
        return self.gitdir / "index"


def main_checkout(workspace: Path) -> Checkout | None:
    """The workspace's own checkout, or None when it is not one worker can treat as data:
    no `.git`, or a `.git` that is a link or a file (which would name another git folder)."""
    common = workspace / ".git"
    if not _is_folder(common):
        if common.is_symlink():
            log.warning("%s is a symbolic link: worker runs no git there", common)
        return None
    return Checkout(tree=workspace, common=common, gitdir=common)


def worktree_checkout(workspace: Path, tree: Path, branch: str) -> Checkout | None:
    """A task worktree as worker made it: the workspace's repository, the worktree's own index
    (in `.git/worktrees/<name>/`, found by worker, never through the worktree's `.git` file),
    and the task's branch as HEAD."""
    main = main_checkout(workspace)
    if main is None:
        return None
    admin = main.common / "worktrees" / tree.name
    return Checkout(tree=tree, common=main.common, gitdir=admin, branch=branch)


def run_git(
    checkout: Checkout,
    *args: str,
    timeout_s: float = GIT_TIMEOUT_S,
    cap_bytes: int = 2_000_000,
    index: Path | None = None,
    extra_env: dict[str, str] | None = None,
) -> ProcResult:
    """`git <args>` on `checkout` through the process chokepoint, with worker's view of it. A
    view that cannot be made (the repository's `refs` a link) is git's own failure (128)."""
    argv = git_argv(*args)
    try:
        with view(checkout) as env:
            env.update(extra_env or {})
            if index is not None:
                env["GIT_INDEX_FILE"] = str(index)
            return run_process(
                argv, cwd=checkout.tree, timeout_s=timeout_s, env=env, cap_bytes=cap_bytes
            )
    except OSError as exc:
        log.warning("worker runs no git in %s: %s", checkout.tree, exc)
        return ProcResult(argv, 128, "", str(exc), 0.0)


def git_argv(*args: str) -> list[str]:
    """`git` with worker's settings on its command line (they win over any file's)."""
    return ["git", "-c", f"core.hooksPath={os.devnull}", "-c", "core.fsmonitor=false", *args]


# What git keeps of a merge in progress: copied from the view to the checkout's git folder, so
# that the agent's `git commit` (or worker's, `workspace_git.finish_worktree`) concludes it.
MERGE_STATE = ("MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "AUTO_MERGE")


@contextlib.contextmanager
def view(checkout: Checkout) -> Iterator[dict[str, str]]:
    """The environment of git processes that see `checkout` through a view of worker's own
    (one view for several commands that share its state, such as `FETCH_HEAD`)."""
    folder = Path(tempfile.mkdtemp(prefix="worker-git-"))
    try:
        _fill(folder, checkout)
        yield {
            **base_env(),
            "GIT_DIR": str(folder),
            "GIT_WORK_TREE": str(checkout.tree),
            "GIT_INDEX_FILE": str(checkout.index),
            "GIT_OBJECT_DIRECTORY": str(checkout.common / "objects"),
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def base_env() -> dict[str, str]:
    """The environment of every git process worker starts: no token, no prompt, no helper a
    variable of the operator's names, only known transports."""
    env = {k: v for k, v in child_env().items() if k not in _REPO_VARIABLES}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_ASKPASS="",  # set, so `core.askPass` is not looked up; empty, so nothing runs
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_ALLOW_PROTOCOL="file:git:http:https:ssh",
        GIT_EDITOR=":",
        GIT_PAGER="cat",
    )
    return env


# Variables that would point git at another repository, index or object store than worker's,
# or name a program (the operator's own GIT_CONFIG_* settings stay: they are not the agent's).
_REPO_VARIABLES = {
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_CONFIG",
}


def _fill(folder: Path, checkout: Checkout) -> None:
    common = checkout.common
    (folder / "HEAD").write_text(_head(checkout) + "\n", encoding="utf-8")
    if not _is_folder(common / "refs"):
        raise OSError(f"{common / 'refs'} is not a folder")
    _link(folder / "refs", common / "refs")
    for name in ("packed-refs", "shallow"):
        if _is_file(common / name):
            _link(folder / name, common / name)
    exclude = read_data(common / "info" / "exclude")
    if exclude is not None:
        (folder / "info").mkdir()
        (folder / "info" / "exclude").write_bytes(exclude)
    (folder / "config").write_text(_config(common), encoding="utf-8")


def _link(at: Path, target: Path) -> None:
    """`at` in the view stands for the repository's `target`: a symbolic link; where making
    one needs a privilege (Windows), a junction for a folder, a copy for a file (the view only
    reads `packed-refs` and `shallow`)."""
    try:
        at.symlink_to(target, target_is_directory=target.is_dir())
    except OSError:  # pragma: no cover - Windows without the privilege to make links
        if target.is_dir() and sys.platform == "win32":
            _winapi.CreateJunction(str(target), str(at))
        else:
            shutil.copyfile(target, at)


def _head(checkout: Checkout) -> str:
    if checkout.branch is not None:
        return f"ref: refs/heads/{checkout.branch}"
    raw = read_data(checkout.common / "HEAD") or b""
    found = _HEAD.fullmatch(raw.decode("ascii", "replace").strip())
    return found.group(0) if found and ".." not in found.group(0) else "ref: refs/heads/main"


def _config(common: Path) -> str:
    own = [f"[{section}]\n\t{key} = {value}\n" for section, key, value in _OWN]
    kept = _repository_keys(read_data(common / "config") or b"")
    for key, value in kept.items():
        section, name = key.split(".", 1)
        own.append(f"[{section}]\n\t{name} = {value}\n")
    return "".join(own)


_SECTION = re.compile(r"\[\s*([A-Za-z0-9.-]+)\s*(\"[^\"]*\")?\s*\](.*)")
_ENTRY = re.compile(r"([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*([A-Za-z0-9]*))?\s*(?:[#;].*)?")


def _repository_keys(raw: bytes) -> dict[str, str]:
    """The kept keys of the repository's config (the file itself, not its includes), read as
    data: a plain `key = value` line under a plain `[section]`; whatever is written otherwise
    is not kept, and git's default applies."""
    section, kept = "", {}
    for line in raw.decode("utf-8", "replace").splitlines():
        line = line.strip()
        header = _SECTION.match(line)
        if header:
            section = "" if header.group(2) else header.group(1).lower()
            line = header.group(3).strip()
        entry = _ENTRY.fullmatch(line)
        if not entry or not section:
            continue
        key, value = f"{section}.{entry.group(1).lower()}", (entry.group(2) or "true").lower()
        if value in _KEPT.get(key, ()):
            kept[key] = value
    return kept


def read_data(path: Path, cap: int = _CONFIG_CAP) -> bytes | None:
    """A small regular file's bytes (see `open_data`); None when it is no such file."""
    with open_data(path) as handle:
        return None if handle is None else handle.read(cap)


@contextlib.contextmanager
def open_data(path: Path) -> Iterator[BufferedReader | None]:
    """A regular file open for reading, never through a link (a FIFO or a device is not read
    either: it could block); None when it is missing or not such a file."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        yield None
        return
    with os.fdopen(fd, "rb") as handle:
        yield handle if stat.S_ISREG(os.fstat(fd).st_mode) else None


def _is_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False
