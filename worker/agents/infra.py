"""Infrastructure failures any adapter can meet before its CLI says a word: an executable that
is missing, not executable or a folder. Named in words, with the setting that fixes it, both
for the preflight (before any task is claimed) and for a start that failed anyway."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from worker.agents.registry import adapter_for
from worker.agents.sandboxed import sandbox_problem
from worker.config import Settings
from worker.models import AgentRequest, InfraFailure, InfraKind
from worker.modes import Mode

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


def executable_of(settings: Settings, mode: Mode) -> str:
    request = AgentRequest(prompt="", model=mode.model, cwd=settings.workspace, timeout_s=1.0)
    adapter = adapter_for(settings, mode)
    return getattr(adapter, "inner", adapter).command(request)[0]  # the agent's, not srt


def preflight(settings: Settings, mode: Mode) -> InfraFailure | None:
    """The mode's agent can start: the sandbox `[sandbox]` requires is there, and its
    executable resolves and is executable."""
    boxless = sandbox_problem(settings)
    if boxless is not None:
        return InfraFailure(InfraKind.MISSING_BINARY, boxless, setting="sandbox.mode")
    executable = executable_of(settings, mode)
    if executable_problem(executable) is None:
        return None
    return missing_binary(mode.agent, executable)
