"""The built-in adapters, in one ordered table; a mode's `agent` key picks one."""

from __future__ import annotations

from collections.abc import Callable

from worker.agents.base import AgentAdapter
from worker.agents.claude import ClaudeAdapter
from worker.agents.codex import CodexAdapter
from worker.agents.command import CommandAdapter
from worker.agents.gemini import GeminiAdapter
from worker.config import Settings
from worker.errors import ConfigError
from worker.modes import Mode, permission_args

_ADAPTERS: dict[str, Callable[[Settings, Mode], AgentAdapter]] = {
    "claude": lambda s, m: ClaudeAdapter(s.claude_bin, cap_bytes=s.output_cap_bytes),
    "codex": lambda s, m: CodexAdapter(s.codex_bin, cap_bytes=s.output_cap_bytes),
    "gemini": lambda s, m: GeminiAdapter(s.gemini_bin, cap_bytes=s.output_cap_bytes),
    "command": lambda s, m: CommandAdapter(list(m.command or []), cap_bytes=s.output_cap_bytes),
}


def adapter_for(settings: Settings, mode: Mode) -> AgentAdapter:
    try:
        factory = _ADAPTERS[mode.agent]
    except KeyError:
        known = ", ".join(_ADAPTERS)
        raise ConfigError(
            f"mode {mode.id!r}: unknown agent {mode.agent!r} (known: {known})"
        ) from None
    return factory(settings, mode)


__all__ = ["adapter_for", "permission_args"]
