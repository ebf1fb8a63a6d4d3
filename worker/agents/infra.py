"""Infrastructure failures any adapter can meet before its CLI says a word: an executable that
is missing, not executable or a folder. Named in words, with the setting that fixes it, both
for the preflight (before any task is claimed) and for a start that failed anyway."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from worker.agents.base import AgentAdapter
from worker.agents.registry import adapter_for
from worker.agents.sandboxed import SandboxedAdapter, sandbox_problem
from worker.config import Settings
from worker.models import AgentRequest, InfraFailure, InfraKind
from worker.modes import Mode
from worker.process.proc import run_process

CLI_NAMES = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}


def cli_name(agent: str) -> str:
    return CLI_NAMES.get(agent, f"the {agent} agent")


def setting_for(agent: str) -> str:
    """The setting that names the agent's executable."""
    return f"{agent}_bin" if agent in CLI_NAMES else "the mode's `command`"


def executable_problem(executable: str) -> str | None:
    """Why `executable` cannot be started, in words; None when it can."""
    if os.sep in executable or (os.altsep and os.altsep in executable):
        path = Path(executable)
        if path.is_dir():
            return f"{executable} is a folder, not a program"
        if not path.exists():
            return f"{executable} does not exist"
        if not os.access(path, os.X_OK):
            return f"{executable} is not executable"
        return None
    if shutil.which(executable) is None:
        return f"`{executable}` was not found on PATH ({os.environ.get('PATH', '')})"
    return None


def missing_binary(agent: str, executable: str, detail: str = "") -> InfraFailure:
    problem = executable_problem(executable) or detail.strip() or f"{executable} did not start"
    setting = setting_for(agent)
    where = f"{setting} (WORKER_{setting.upper()})" if agent in CLI_NAMES else setting
    return InfraFailure(
        InfraKind.MISSING_BINARY,
        f"{cli_name(agent)} cannot start: {problem}. Set {where} to the full path of the "
        "program (cron and systemd run with a short PATH)",
        setting=setting,
    )


def layers(adapter: AgentAdapter) -> list[AgentAdapter]:
    """The adapter and those under it (the masking door, the box, the agent's own)."""
    found = [adapter]
    while "inner" in vars(found[-1]):  # vars: Masked forwards any other attribute to its inner
        found.append(vars(found[-1])["inner"])
    return found


def preflight(settings: Settings, mode: Mode) -> InfraFailure | None:
    """The mode's agent can start: the sandbox `[sandbox]` requires is there, and its
    executable resolves and is executable, here and inside the box it will run in."""
    boxless = sandbox_problem(settings)
    if boxless is not None:
        return InfraFailure(InfraKind.MISSING_BINARY, boxless, setting="sandbox.mode")
    adapter = adapter_for(settings, mode)
    *outer, own = layers(adapter)
    executable = own.command(_request(settings, mode))[0]  # the agent's, not the runtime's
    if executable_problem(executable) is not None:
        return missing_binary(mode.agent, executable)
    boxed = next((layer for layer in outer if isinstance(layer, SandboxedAdapter)), None)
    if boxed is None:
        return None
    hidden = _hidden_in_box(boxed, executable, _request(settings, mode))
    return None if hidden is None else missing_binary(mode.agent, executable, hidden)


_FINDS = 'command -v "$1" >/dev/null || { echo "not found in the box: $1" >&2; exit 127; }'
_BOX_PROBE_TIMEOUT_S = 60.0  # the runtime's start (srt starts its proxies)


def _hidden_in_box(adapter: SandboxedAdapter, executable: str, request: AgentRequest) -> str | None:
    """Why the box the agent runs in cannot start `executable` (a folder it hides, a
    runtime that cannot start), in words; None when it can."""
    box = adapter.boxed(request).sandbox
    assert box is not None
    probe = ["/bin/sh", "-c", _FINDS, "sh", executable]
    # Twice, unless the program is missing (127): a runtime that failed to start once may be
    # a loaded machine's hiccup, and a failure here is exit 78, which stops `worker serve`.
    for _ in range(2):
        with box.launch(probe, request.cwd, create=False) as (argv, env):
            proc = run_process(argv, cwd=request.cwd, timeout_s=_BOX_PROBE_TIMEOUT_S, env=env)
        if proc.exit_code in (0, 127):
            break
    if proc.exit_code == 0:
        return None
    said = proc.stderr_tail.strip().splitlines()[-1:] or [f"exit {proc.exit_code}"]
    return (
        f"{executable} cannot be started inside the sandbox ({box.runtime.name}): {said[0]}; "
        "put it where the box can read it"
    )


def _request(settings: Settings, mode: Mode) -> AgentRequest:
    return AgentRequest(prompt="", model=mode.model, cwd=settings.workspace, timeout_s=1.0)
