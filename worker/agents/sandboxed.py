"""Any adapter, in the sandbox `[sandbox]` asks for: the registry hands this out in its place,
and the request it runs carries the box to the one launcher (agents/base.py), so that the
adapter itself never knows (worker/sandbox/box.py)."""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from worker import secrets
from worker.config import Settings
from worker.modes import Mode
from worker.results import AgentRequest, AgentResult
from worker.sandbox.box import Sandbox, find_runtime
from worker.sandbox.programs import unstarted
from worker.sandbox.reach import named_secrets
from worker.sandbox.report import refusals

if TYPE_CHECKING:
    from worker.agents.base import AgentAdapter, EventHandler

log = logging.getLogger(__name__)
REQUIRED = (
    "the sandbox is required (sandbox.mode, or sandbox.untrusted_mode for a GitHub issue) and"
)
_WARNED: set[str] = set()  # the warning of `auto` without a runtime, once per process


class SandboxedAdapter:
    """`inner`, run in `box`: its command is shown wrapped; its result says it was boxed."""

    def __init__(self, inner: AgentAdapter, box: Sandbox) -> None:
        self.inner, self.box = inner, box
        self.name = inner.name
        self.resumes = inner.resumes  # the box changes nothing of the session

    def command(self, request: AgentRequest) -> list[str]:
        boxed = self.boxed(request)
        assert boxed.sandbox is not None
        return boxed.sandbox.command(self.inner.command(boxed), request.cwd)

    def boxed(self, request: AgentRequest) -> AgentRequest:
        """The request with its box. Codex's own sandbox is bubblewrap, which cannot run
        inside another (the runtime refuses nested namespaces): in the box it is turned off
        and the box holds its limits, the working tree read-only for `read-only`."""
        if self.name != "codex":
            return dataclasses.replace(request, sandbox=self.box)
        args, own = without_codex_sandbox(request.extra_args)
        if own == "danger-full-access":
            return dataclasses.replace(request, sandbox=self.box)
        box = self.box.read_only() if own == "read-only" else self.box
        return dataclasses.replace(request, extra_args=args, sandbox=box)

    def run(self, request: AgentRequest, on_event: EventHandler | None = None) -> AgentResult:
        result = self.inner.run(self.boxed(request), on_event)
        result.sandbox = self.box.runtime.name
        # The box started, the agent's program did not (gone since the preflight looked).
        result.not_found = result.not_found or unstarted(result.exit_code, result.stderr_tail)
        result.sandbox_refusals = refusals(result.events)
        return result


def sandboxed(settings: Settings, mode: Mode, adapter: AgentAdapter) -> AgentAdapter:
    """`adapter` in the mode's sandbox, or as it is: with the sandbox off, or in `auto` where
    no runtime is installed (a warning). `required` without one is refused before any claim
    (`sandbox_problem`, the preflight); here it is refused again, never run unboxed."""
    # What the settings name as secrets stays out of every child from now on, boxed or not.
    secrets.remember(named_secrets(settings)[0])
    box = settings.sandbox
    if box.mode == "off":
        return adapter
    runtime, why = find_runtime(box)
    if runtime is None:
        if box.mode == "required":
            from worker.errors import ConfigError

            raise ConfigError(f"{REQUIRED} {why}")
        if why not in _WARNED:
            _WARNED.add(why)
            log.warning("the agent runs without a sandbox: %s", why)
        return adapter
    return SandboxedAdapter(adapter, Sandbox(settings, mode.agent, runtime))


def sandbox_problem(settings: Settings) -> str | None:
    """Why no agent may start: `required` and no runtime that enforces it; None otherwise."""
    box = settings.sandbox
    if box.mode != "required":
        return None
    runtime, why = find_runtime(box)
    return None if runtime is not None else f"{REQUIRED} {why}"


def without_codex_sandbox(args: tuple[str, ...]) -> tuple[tuple[str, ...], str | None]:
    """Codex's arguments with its `--sandbox MODE` (`-s MODE`, `--sandbox=MODE`) turned to
    `danger-full-access`, and the mode asked for (None: none given)."""
    out: list[str] = []
    asked = None
    items = iter(args)
    for arg in items:
        if arg in ("--sandbox", "-s"):
            asked = next(items, None)
            out += [arg, "danger-full-access"]
        elif arg.startswith("--sandbox="):
            asked = arg.split("=", 1)[1]
            out.append("--sandbox=danger-full-access")
        else:
            out.append(arg)
    return tuple(out), asked
