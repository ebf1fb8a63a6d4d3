"""Modes: load `modes.json` (the specification's camelCase format), validate, auto-detect.

A mode's escalation chain follows `escalation.triggerMode`; an unknown trigger or a cycle is a
configuration error. Our own keys (agent, iterationTimeoutSeconds, costCapUsd, permissionMode,
match, default, description) sit beside the specification's.
"""

# Annotations evaluated as written, not postponed: worker/config.py says why.

import json
import logging
import re
from importlib import resources
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from worker.errors import ConfigError, describe_validation
from worker.models import Task

log = logging.getLogger(__name__)

# The permissionMode values each agent's CLI accepts (the pinned versions: Claude Code 2.1's
# `--permission-mode` choices, which still take `default`; codex 0.169's `--sandbox` modes;
# Gemini CLI 0.61's `--approval-mode` choices). The `command` agent takes none.
PERMISSION_MODES: dict[str, tuple[str, ...]] = {
    "claude": ("default", "acceptEdits", "auto", "bypassPermissions", "dontAsk", "manual", "plan"),
    "codex": ("read-only", "workspace-write", "danger-full-access"),
    "gemini": ("default", "auto_edit", "yolo", "plan"),
}
# A codex mode without a permissionMode may edit its working tree: worker's tasks are edits.
CODEX_DEFAULT_SANDBOX = "workspace-write"


class Escalation(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    trigger_mode: str = Field(alias="triggerMode")
    # Iterations in this mode before moving to the trigger mode (default: the mode's own cap).
    max_iterations: int | None = Field(None, alias="maxIterations", gt=0)


class Mode(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str = Field(min_length=1)
    model: str = Field(min_length=1)
    max_iterations: int = Field(alias="maxIterations", gt=0, le=250)
    escalation: Escalation | None = None
    description: str = ""
    agent: str = "claude"  # claude | codex | gemini | command (worker.agents.registry)
    command: list[str] | None = None  # argv for the `command` agent
    iteration_timeout_s: float | None = Field(None, alias="iterationTimeoutSeconds", gt=0)
    cost_cap_usd: float | None = Field(None, alias="costCapUsd", gt=0)
    permission_mode: str | None = Field(None, alias="permissionMode")
    # `[]`, not `default_factory=list` (worker/config.py says why)
    extra_args: list[str] = Field([], alias="extraArgs")
    match: list[str] = []  # words that auto-select this mode
    default: bool = False

    @field_validator("id", "model")
    @classmethod
    def _printable(cls, value: str) -> str:
        if not value.isprintable():  # they reach command lines, file names, replies and logs
            raise ValueError("must not contain control characters (newlines, tabs)")
        return value

    @property
    def iterations_before_escalation(self) -> int:
        if self.escalation and self.escalation.max_iterations:
            return min(self.escalation.max_iterations, self.max_iterations)
        return self.max_iterations


class ModesFile(BaseModel):
    model_config = ConfigDict(extra="allow")  # the specification's files may carry more keys

    modes: list[Mode] = Field(min_length=1)


class ModeSet(NamedTuple):
    """The validated modes, by id, and where they were read from."""

    modes: dict[str, Mode]
    source: str

    def get(self, mode_id: str) -> Mode:
        try:
            return self.modes[mode_id]
        except KeyError:
            known = ", ".join(self.modes)
            raise ConfigError(f"unknown mode {mode_id!r} (known: {known})") from None

    def chain(self, mode_id: str) -> list[str]:
        """The mode and every stronger mode it escalates to, in order."""
        chain = [mode_id]
        mode = self.get(mode_id)
        while mode.escalation is not None:
            chain.append(mode.escalation.trigger_mode)
            mode = self.modes[mode.escalation.trigger_mode]
        return chain

    def next_mode(self, mode_id: str, asked: str | None = None) -> str | None:
        """The mode to escalate to: `asked` when it names a stronger mode (or a stronger mode's
        model), otherwise the trigger mode; None at the top of the chain."""
        stronger = self.chain(mode_id)[1:]
        if asked:
            wanted = asked.strip().lower()
            for candidate in stronger:
                if candidate.lower() == wanted or self.modes[candidate].model.lower() == wanted:
                    return candidate
        return stronger[0] if stronger else None

    def detect(self, task: Task) -> tuple[str, str]:
        """Pick a mode deterministically: (mode id, reason code). A task asking for a mode
        that does not exist falls back to the rules below, with a warning and MODE_UNKNOWN."""
        if task.mode and task.mode in self.modes:
            return task.mode, "MODE_FROM_TASK"
        if task.mode:
            mode_id, rule = self._detect(task)
            log.warning(
                "%s asks for mode %r, which %s does not define; using %s (%s)",
                task.id,
                task.mode,
                self.source,
                mode_id,
                rule,
            )
            return mode_id, "MODE_UNKNOWN"
        return self._detect(task)

    def _detect(self, task: Task) -> tuple[str, str]:
        text = f"{task.title}\n{task.body[:4000]}".lower()
        for mode in self.modes.values():
            if any(re.search(rf"\b{re.escape(word.lower())}", text) for word in mode.match):
                return mode.id, "MODE_MATCHED_RULE"
        for mode in self.modes.values():
            if mode.default:
                return mode.id, "MODE_DEFAULT"
        return next(iter(self.modes)), "MODE_FIRST"


def load_modes(path: Path | None) -> ModeSet:
    """Read and validate a modes file; None reads the embedded defaults."""
    if path is None:
        text = resources.files("worker").joinpath("defaults/modes.json").read_text("utf-8")
        source = "embedded defaults"
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"modes_file: cannot read {path}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        source = str(path)
    try:
        parsed = ModesFile.model_validate(json.loads(text))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not valid JSON at line {exc.lineno}: {exc.msg}") from exc
    except RecursionError:  # `[[[[...` thousands deep: Python's stack, not a modes file
        raise ConfigError(f"{source}: not a modes file: JSON nested too deep") from None
    except ValidationError as exc:
        details = describe_validation(exc, limit=20)
        raise ConfigError(f"{source}: invalid modes: {details}") from exc
    return validate_modes(parsed.modes, source)


def validate_modes(modes: list[Mode], source: str) -> ModeSet:
    by_id: dict[str, Mode] = {}
    for mode in modes:
        if mode.id in by_id:
            raise ConfigError(f"{source}: mode {mode.id!r} is defined twice")
        if mode.agent == "command" and not mode.command:
            raise ConfigError(f"{source}: mode {mode.id!r}: agent 'command' needs 'command'")
        check_permission_mode(mode, source)
        by_id[mode.id] = mode
    defaults = [mode.id for mode in modes if mode.default]
    if len(defaults) > 1:
        raise ConfigError(
            f"{source}: {len(defaults)} modes say default: {', '.join(defaults)}; keep one"
        )
    for mode in modes:
        seen = [mode.id]
        current = mode
        while current.escalation is not None:
            target = current.escalation.trigger_mode
            if target not in by_id:
                raise ConfigError(
                    f"{source}: mode {current.id!r}: escalation.triggerMode {target!r} "
                    "is not a known mode"
                )
            if target in seen:
                cycle = " -> ".join([*seen, target])
                raise ConfigError(f"{source}: escalation cycle: {cycle}")
            seen.append(target)
            current = by_id[target]
    return ModeSet(by_id, source)


def check_permission_mode(mode: Mode, source: str) -> None:
    """A permissionMode the mode's agent CLI would refuse (or ignore) is a configuration error
    naming the values it accepts."""
    value = mode.permission_mode
    if value is None or (mode.agent not in PERMISSION_MODES and mode.agent != "command"):
        return  # an unknown agent is reported when the mode is used
    allowed = PERMISSION_MODES.get(mode.agent, ())
    if value in allowed:
        return
    where = f"{source}: mode {mode.id!r}: permissionMode {value!r}"
    if not allowed:
        raise ConfigError(f"{where}: agent {mode.agent!r} takes no permissionMode")
    near = [known for known in allowed if known.lower() == value.lower()]
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    raise ConfigError(
        f"{where} is not one {mode.agent} accepts{hint}; allowed: {', '.join(allowed)}"
    )


def permission_args(mode: Mode) -> tuple[str, ...]:
    """The CLI flags of the mode's permissionMode, then its extraArgs. Codex gets a sandbox
    (workspace-write by default) and the approval policy that never asks: `codex exec` cannot
    ask anyone, and a command the sandbox refuses then fails back to the model at once."""
    args: list[str] = []
    if mode.agent == "claude" and mode.permission_mode:
        args += ["--permission-mode", mode.permission_mode]
    elif mode.agent == "gemini" and mode.permission_mode:
        args += ["--approval-mode", mode.permission_mode]
    elif mode.agent == "codex":
        own_sandbox = any(
            arg in ("-s", "--sandbox") or arg.startswith("--sandbox=") for arg in mode.extra_args
        )
        if mode.permission_mode or not own_sandbox:
            args += ["--sandbox", mode.permission_mode or CODEX_DEFAULT_SANDBOX]
        args += ["--config", 'approval_policy="never"']
    return (*args, *mode.extra_args)


def modes_path(workspace: Path, configured: Path | None) -> Path | None:
    """The configured file, else `<workspace>/modes/modes.json` if present, else embedded."""
    if configured is not None:
        return configured if configured.is_absolute() else workspace / configured
    local = workspace / "modes" / "modes.json"
    return local if local.is_file() else None
