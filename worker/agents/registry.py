"""The built-in adapters, in one ordered table; a mode's `agent` key picks one.

The table names each adapter's module and class: the module is imported when its agent is
used, so a run (or a dry run) loads the configured adapter only, not all four (each brings its
stream parser, and all of them the process layer).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from worker.agents.sandboxed import sandboxed
from worker.config import Settings
from worker.errors import ConfigError
from worker.modes import Mode, permission_args
from worker.process.lazyimport import lazy

_base = lazy("worker.agents.base")  # Masked, loaded with the adapter (it brings the process layer)

if TYPE_CHECKING:
    from worker.agents.base import AgentAdapter
    from worker.models import AgentResult

# agent -> (module under worker.agents, adapter class)
_ADAPTERS: dict[str, tuple[str, str]] = {
    "claude": ("claude", "ClaudeAdapter"),
    "codex": ("codex", "CodexAdapter"),
    "gemini": ("gemini", "GeminiAdapter"),
    "command": ("command", "CommandAdapter"),
}

# agent -> (module, the collector that folds its stream): to read back an iteration's log
_COLLECTORS: dict[str, tuple[str, str]] = {
    "claude": ("claude", "StreamCollector"),
    "codex": ("codex", "CodexCollector"),
    "gemini": ("gemini", "GeminiCollector"),
}


def replay_log(agent: str, path: Path) -> AgentResult | None:
    """What an iteration's output log says the agent did (its cost, tokens and last words,
    masked like a live call's), or None when the agent's stream is not one worker folds or
    the log is missing: for a run that died before it recorded the iteration."""
    if agent not in _COLLECTORS or not path.is_file():
        return None
    module_name, class_name = _COLLECTORS[agent]
    collector = getattr(importlib.import_module(f"worker.agents.{module_name}"), class_name)()
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            collector.feed(line.rstrip("\n"))
    result: AgentResult = collector.result(0)
    return _base.mask_result(result, _base.output_redactor())


def adapter_for(settings: Settings, mode: Mode) -> AgentAdapter:
    try:
        module_name, class_name = _ADAPTERS[mode.agent]
    except KeyError:
        known = ", ".join(_ADAPTERS)
        raise ConfigError(
            f"mode {mode.id!r}: unknown agent {mode.agent!r} (known: {known})"
        ) from None
    module = importlib.import_module(f"worker.agents.{module_name}")
    adapter: Callable[..., AgentAdapter] = getattr(module, class_name)
    if mode.agent == "command":
        made = adapter(list(mode.command or []), cap_bytes=settings.output_cap_bytes)
    else:
        executable: str = getattr(settings, f"{mode.agent}_bin")  # claude_bin, codex_bin, ...
        made = adapter(executable, cap_bytes=settings.output_cap_bytes)
    # The door where the agent's words are masked, around the box it runs in.
    masked: AgentAdapter = _base.Masked(sandboxed(settings, mode, made))
    return masked


def resumes_sessions(settings: Settings, mode: Mode) -> bool:
    """Whether the mode's agent CLI resumes a session, which then holds what it was told."""
    return adapter_for(settings, mode).resumes


__all__ = ["adapter_for", "permission_args", "replay_log", "resumes_sessions"]
