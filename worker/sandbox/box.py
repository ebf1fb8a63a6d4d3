"""The agent in a box: the operating system's limits on what an agent CLI, and every process it
starts, may read, write and reach.

One place wraps the agent's command (`launch`, called by the adapters' one launcher,
agents/base.py); the adapters never know. The runtimes are the well-kept ones: Anthropic's
sandbox runtime (`srt`: bubblewrap and a filtering proxy on Linux, `sandbox-exec` on macOS)
where it is installed, bubblewrap directly as the Linux fallback (files only: it has no proxy,
so the network stays open, and `required` asks for the full set).

The policy: writes only to the working tree (or worktree), the agent CLI's own session folder
(less the files worker reads to make the box: Codex's config.toml, worker/sandbox/hosts.py)
and a private temporary folder; reads refused for the user's secrets folders, worker's whole
state home (every workspace's database, inbox, transcripts and worktrees but the agent's own),
worker's configuration and the files its settings name as secrets (worker/sandbox/reach.py);
`/tmp` and `/run` empty (no other program's files or sockets); no capability, even as root; an
environment by allow-list; the network only to the model's API host and `[sandbox]
allow_hosts` (srt: bubblewrap alone leaves it open).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worker import secrets
from worker.config import Settings
from worker.process.proc import child_env, run_process
from worker.sandbox import reach
from worker.sandbox.hosts import box_files, model_hosts, no_proxy_without
from worker.sandbox.settings import SandboxSettings

if TYPE_CHECKING:
    from worker.results import AgentRequest

# Where each agent CLI keeps its sessions and settings: (variable naming it, default under ~).
SESSION_DIRS: dict[str, tuple[tuple[str, str], ...]] = {
    "claude": (("CLAUDE_CONFIG_DIR", ".claude"),),
    "codex": (("CODEX_HOME", ".codex"),),
    "gemini": (("GEMINI_CLI_HOME", ".gemini"),),
}
SETTINGS_PLACEHOLDER = "<sandbox settings>"
TMP_PLACEHOLDER = "<private tmp>"
INSTALL_HINT = (
    "install the sandbox runtime (`npm install -g @anthropic-ai/sandbox-runtime`, the `srt` "
    "command) with bubblewrap, socat and ripgrep (`apt-get install bubblewrap socat ripgrep`)"
)


@dataclass(frozen=True)
class Runtime:
    """A sandbox runtime found on this machine: `srt` or `bwrap`, and what it enforces."""

    name: str
    path: str

    @property
    def network(self) -> bool:
        return self.name == "srt"


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


def find_runtime(box: SandboxSettings) -> tuple[Runtime | None, str]:
    """The runtime `box` asks for and this machine has and can run, or None and why not."""
    runtime, why = _choose(box)
    if runtime is None or not sys.platform.startswith("linux"):
        return runtime, why
    bwrap = runtime.path if runtime.name == "bwrap" else shutil.which("bwrap") or "bwrap"
    broken = namespaces_problem(bwrap)
    if broken:
        return (
            None,
            f"{runtime.name} cannot run here: bubblewrap cannot make its namespaces ({broken})",
        )
    return runtime, ""


@functools.cache
def namespaces_problem(bwrap: str) -> str | None:
    """Why bubblewrap cannot make its namespaces on this machine (a container without user
    namespaces, Ubuntu's AppArmor rule); None when it can. Asked once per process."""
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net"]
    proc = run_process([*argv, "true"], cwd=Path("/"), timeout_s=30)
    if proc.exit_code == 0:
        return None
    return proc.stderr_tail.strip()[-300:] or f"bwrap exited with {proc.exit_code}"


def _choose(box: SandboxSettings) -> tuple[Runtime | None, str]:
    if box.mode == "off":
        return None, 'the sandbox is off (sandbox.mode = "off")'
    srt = shutil.which(box.srt_bin)
    bwrap = shutil.which(box.bwrap_bin)
    if sys.platform == "win32" and box.runtime != "srt":
        return None, 'on Windows only an explicit sandbox.runtime = "srt" is used (alpha)'
    if srt and box.runtime in ("auto", "srt"):
        missing = _srt_needs()
        if not missing:
            return Runtime("srt", srt), ""
        if box.runtime == "srt":
            return None, f"srt is installed but needs {', '.join(missing)}"
    elif box.runtime == "srt":
        return None, f"`{box.srt_bin}` was not found on PATH"
    if sys.platform.startswith("linux") and bwrap and box.runtime in ("auto", "bwrap"):
        if box.mode == "required":
            return None, f"bubblewrap alone cannot limit the network: {INSTALL_HINT}"
        return Runtime("bwrap", bwrap), ""
    return None, f"no sandbox runtime found: {INSTALL_HINT}"


def _srt_needs() -> list[str]:
    """What the sandbox runtime needs beside itself on this platform (its README)."""
    if not sys.platform.startswith(("linux", "darwin")):
        return []
    needed = ["rg"] if sys.platform == "darwin" else ["bwrap", "socat", "rg"]
    return [name for name in needed if shutil.which(name) is None]


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
    allow_read = [path for path in write if any(_inside(path, d) for d in [*deny, *private])]
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
    as `process/workspace_git` makes it), never from the worktree's `.git` file or
    `commondir`, which the agent can rewrite to be given another folder in its next box.
    Its refs stay read-only: worker commits the worktree's work itself."""
    common = workspace / ".git"
    if cwd == workspace or not (cwd / ".git").is_file() or common.is_symlink():
        return []
    own = common / "worktrees" / cwd.name
    found = [own, common / "objects"]
    return [path for path in found if path.is_dir() and not path.is_symlink()]


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _unique(items: list[Any]) -> list[Any]:
    return list(dict.fromkeys(items))


class Sandbox:
    """The box one agent runs in: its runtime and the settings its policy comes from."""

    def __init__(
        self, settings: Settings, agent: str, runtime: Runtime, *, tree: bool = True
    ) -> None:
        self.settings, self.agent, self.runtime = settings, agent, runtime
        self.tree = tree  # the working tree may be written

    def read_only(self) -> Sandbox:
        """The same box with the working tree read-only."""
        return Sandbox(self.settings, self.agent, self.runtime, tree=False)

    def command(
        self, argv: list[str], cwd: Path, settings_file: str = SETTINGS_PLACEHOLDER
    ) -> list[str]:
        """`argv` as the runtime runs it (a dry run shows this, with placeholders)."""
        policy = policy_for(self.settings, self.agent, cwd, tree=self.tree)
        return self._wrap(argv, cwd, policy, settings_file)

    def _wrap(self, argv: list[str], cwd: Path, policy: Policy, settings_file: str) -> list[str]:
        if self.runtime.name == "srt":
            inner = list(argv)
            if policy.no_proxy is not None:  # the model's API is local: through the proxy
                inner = [
                    "env",
                    f"NO_PROXY={policy.no_proxy}",
                    f"no_proxy={policy.no_proxy}",
                    *inner,
                ]
            return [self.runtime.path, "--settings", settings_file, "--", *inner]
        return [self.runtime.path, *bwrap_args(policy, cwd), "--", *argv]

    @contextlib.contextmanager
    def launch(
        self,
        argv: list[str],
        cwd: Path,
        variables: Mapping[str, str] | None = None,
        *,
        create: bool = True,
    ) -> Iterator[tuple[list[str], dict[str, str]]]:
        """The wrapped command and its environment (`variables` on top: the CLI's folder of a
        task of its own is the one the box opens), with a private temporary folder and the
        runtime's settings file that last as long as the command (`create`: make the CLI's
        folder if missing; a look that changes nothing does not)."""
        variables = dict(variables or {})
        folder = Path(tempfile.mkdtemp(prefix="worker-sandbox-"))
        try:
            tmp = folder / "tmp"
            tmp.mkdir()
            env_in = {**os.environ, **variables}
            policy = policy_for(
                self.settings, self.agent, cwd, env_in, create=create, tree=self.tree
            )
            policy = Policy(**{**policy.__dict__, "write": [*policy.write, tmp], "tmp": tmp})
            settings_file = folder / "srt-settings.json"
            settings_file.write_text(json.dumps(srt_settings(policy)), encoding="utf-8")
            env = reach.agent_env(self.settings, self.agent)
            env.update(variables or {})
            env.update(TMPDIR=str(tmp), CLAUDE_CODE_TMPDIR=str(tmp))
            yield self._wrap(argv, cwd, policy, str(settings_file)), env
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def srt_settings(policy: Policy) -> dict[str, Any]:
    """The sandbox runtime's settings file (its README: Configuration)."""
    return {
        "network": {"allowedDomains": policy.hosts, "deniedDomains": []},
        "filesystem": {
            "denyRead": [str(path) for path in [*policy.private, *policy.deny_read]],
            "allowRead": [str(path) for path in [*policy.allow_read, *policy.read_back]],
            "allowWrite": [str(path) for path in policy.write],
            "denyWrite": [str(path) for path in policy.read_only],
        },
    }


def bwrap_args(policy: Policy, cwd: Path) -> list[str]:
    """bubblewrap's arguments: no capability (as root too: `umount` and `mount -o remount`
    refused), the system read-only, /tmp and /run empty, the denied paths hidden (an empty
    folder, made read-only last, once the writable paths beneath it are bound back), the
    writable ones bound back, the read-only files in them bound over them (a regular file only:
    a mount on a link would land on what it points at); a parent's mount before the mounts
    beneath it."""
    denied = [path for path in policy.deny_read if path.exists()]
    # A denied path inside another is hidden with it (its mount point could not be made).
    denied = [p for p in denied if not any(d != p and _inside(p, d) for d in denied)]
    mounts = [(path, ["--tmpfs", str(path)]) for path in policy.private]
    mounts += [(path, ["--ro-bind", str(path), str(path)]) for path in policy.read_back]
    for path in denied:
        if path.is_dir():
            mounts.append((path, ["--tmpfs", str(path)]))
        else:
            mounts.append((path, ["--ro-bind", "/dev/null", str(path)]))
    for path in policy.write:
        if path.exists():
            mounts.append((path, ["--bind", str(path), str(path)]))
    for path in policy.read_only:
        if path.is_file() and not path.is_symlink():
            mounts.append((path, ["--ro-bind", str(path), str(path)]))
    args = ["--die-with-parent", "--unshare-pid", "--unshare-ipc", "--cap-drop", "ALL"]
    args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for _, mount in sorted(mounts, key=lambda item: len(item[0].parts)):
        args += mount
    for path in [*denied, *(p for p in policy.private if not p.name.endswith("tmp"))]:
        if path.is_dir():
            args += ["--remount-ro", str(path)]
    args += ["--setenv", "TMPDIR", str(policy.tmp), "--chdir", str(cwd)]
    return args


@contextlib.contextmanager
def launch(
    request: AgentRequest, argv: list[str]
) -> Iterator[tuple[list[str], dict[str, str] | None]]:
    """The command that starts the agent: `argv` in the request's sandbox, if it has one (its
    environment by allow-list); unboxed, worker's children's environment without the doors
    that let in whoever connects as the same user (ssh-agent, D-Bus)."""
    if request.sandbox is None:
        yield argv, {**unboxed_env(), **request.env}
        return
    with request.sandbox.launch(argv, request.cwd, request.env) as (wrapped, env):
        yield wrapped, env


def unboxed_env() -> dict[str, str]:
    """The environment of what the agent could have written (the agent, the project's
    programs) where no box runs it: worker's children's, without the doors that let in
    whoever connects as the same user (ssh-agent, D-Bus)."""
    return {k: v for k, v in child_env().items() if k not in secrets.USER_DOORS}
