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

Here the box itself (`Sandbox`) and the agent's command in it (`launch`); the runtime is chosen in
worker/sandbox/runtime.py, the policy drawn in worker/sandbox/policy.py and handed to the
runtime by worker/sandbox/runtime_args.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from worker import secrets
from worker.config import Settings
from worker.process.proc import child_env
from worker.sandbox import reach
from worker.sandbox.policy import (
    SESSION_DIRS,
    TMP_PLACEHOLDER,
    Policy,
    for_task,
    policy_for,
    session_dirs,
)
from worker.sandbox.runtime import INSTALL_HINT, Runtime, find_runtime, namespaces_problem
from worker.sandbox.runtime_args import bwrap_args, srt_settings

__all__ = [
    "INSTALL_HINT",
    "SESSION_DIRS",
    "SETTINGS_PLACEHOLDER",
    "TMP_PLACEHOLDER",
    "Policy",
    "Runtime",
    "Sandbox",
    "bwrap_args",
    "find_runtime",
    "for_task",
    "launch",
    "namespaces_problem",
    "policy_for",
    "session_dirs",
    "srt_settings",
    "unboxed_env",
]

if TYPE_CHECKING:
    from worker.results import AgentRequest

SETTINGS_PLACEHOLDER = "<sandbox settings>"


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
