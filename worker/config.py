"""Settings: embedded defaults < `worker.toml` in the workspace < `WORKER_*` environment.

Every section is a Pydantic model that forbids unknown keys, so a typo in `worker.toml` is a
configuration error that names the key, not a silently ignored setting.
"""

# Not `from __future__ import annotations`, here nor in the sections' modules, the modes and
# the kernel's and domain types: with it every annotation is a string that pydantic (and
# NamedTuple) compile and `eval` as each class is built, about 2 ms of every command's start.

import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
)

from worker.daemon.settings import DaemonSettings
from worker.errors import ConfigError
from worker.fleet.settings import FleetSettings
from worker.notify.settings import NotifySettings
from worker.retention_settings import RetentionSettings
from worker.review.settings import ReviewSettings
from worker.sources.github.settings import GitHubSettings
from worker.statedir import check_locations, default_state_dir
from worker.supervision.settings import SupervisionSettings
from worker.waits.settings import WaitSettings

CONFIG_FILE = "worker.toml"
ENV_PREFIX = "WORKER_"
# Variables that are not settings (secrets are read where they are used, never stored here).
_NOT_SETTINGS = {"WORKER_GITHUB_TOKEN", "WORKER_GIT_TOKEN"}


class FallbackSettings(BaseModel):
    """The daily maintenance task: build and test the workspace, repair only what fails."""

    model_config = ConfigDict(extra="forbid", defer_build=True)  # see Settings

    enabled: bool = True
    build: list[str] | None = None  # shell commands; None = detect from the project type
    test: list[str] | None = None
    interval_hours: PositiveFloat = 24.0
    command_timeout_s: PositiveFloat = 1800.0
    mode: str = "code-simple"


class Settings(BaseModel):
    """The whole configuration of one workspace."""

    model_config = ConfigDict(extra="forbid")

    workspace: Path
    machine_id: str = Field(default_factory=socket.gethostname, min_length=1)
    inbox_dir: Path | None = None  # None: `<state>/inbox`, outside the working tree
    allow_inbox_in_workspace: bool = False
    wait_states_dir: Path | None = None
    state_dir: Path | None = None
    reports_dir: Path | None = None
    modes_file: Path | None = None
    claude_bin: str = "claude"
    codex_bin: str = "codex"
    gemini_bin: str = "gemini"
    lease_seconds: PositiveInt = 3600
    iteration_timeout_s: PositiveFloat = 1800.0
    task_wall_clock_s: PositiveFloat = 4 * 3600.0
    # SWE-agent's default budget per task is $3 (its `per_instance_cost_limit`).
    task_cost_cap_usd: PositiveFloat = 3.0
    # This machine's spend per UTC day (agents and reviewers); reached, tasks wait for the next.
    daily_cost_cap_usd: PositiveFloat | None = None
    output_cap_bytes: int = Field(2_000_000, gt=1000)
    # Each section, and each model in it, is validated as a part of this model, defaults too
    # (`{}`, validated): a command builds this one validator as it starts, and a section's
    # own (`defer_build`) only if one is made by itself. Building them all as well cost
    # about 3 ms of every start. An empty list's default is `[]`, which pydantic copies for
    # each model, not `default_factory=list`: pydantic reads a factory's signature, and
    # `list`'s is parsed by Python's tokenizer, whose patterns take 2 ms to compile.
    fallback: FallbackSettings = Field(default_factory=dict, validate_default=True)
    github: GitHubSettings = Field(default_factory=dict, validate_default=True)
    waits: WaitSettings = Field(default_factory=dict, validate_default=True)
    supervision: SupervisionSettings = Field(default_factory=dict, validate_default=True)
    review: ReviewSettings = Field(default_factory=dict, validate_default=True)
    daemon: DaemonSettings = Field(default_factory=dict, validate_default=True)
    fleet: FleetSettings = Field(default_factory=dict, validate_default=True)
    retention: RetentionSettings = Field(default_factory=dict, validate_default=True)
    notify: NotifySettings = Field(default_factory=dict, validate_default=True)

    @field_validator("machine_id")
    @classmethod
    def _safe_machine_id(cls, value: str) -> str:
        if any(ch in value for ch in "/\\\0") or value in {".", ".."}:
            raise ValueError("must not contain path separators")
        return value

    # Resolved folders: one state root, everything else relative to the workspace.
    @property
    def inbox(self) -> Path:
        if self.inbox_dir is None:
            return self.state / "inbox"
        return self._resolve(self.inbox_dir, "")

    @property
    def wait_states(self) -> Path:
        return self._resolve(self.wait_states_dir, "wait_states")

    @property
    def state(self) -> Path:
        if self.state_dir is None:
            return default_state_dir(self.workspace)
        return self._resolve(self.state_dir, "")

    @property
    def reports(self) -> Path:
        if self.reports_dir is None:
            return self.state / "reports"
        return self._resolve(self.reports_dir, "")

    @property
    def db_path(self) -> Path:
        return self.state / "worker.db"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    def _resolve(self, value: Path | None, default: str) -> Path:
        path = value if value is not None else Path(default)
        return path if path.is_absolute() else self.workspace / path


def load_settings(
    workspace: Path, env: Mapping[str, str] | None = None, **overrides: Any
) -> Settings:
    """Read `worker.toml` and the environment; raise ConfigError naming the bad key."""
    env = os.environ if env is None else env
    workspace = workspace.resolve()
    if not workspace.is_dir():
        raise ConfigError(f"workspace {workspace} is not a folder (--workspace)")
    data: dict[str, Any] = {}
    config_path = workspace / CONFIG_FILE
    if config_path.exists():
        import tomllib  # only with a worker.toml to read

        try:
            data = tomllib.loads(config_path.read_text(encoding="utf-8-sig"))  # BOM: Windows
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{config_path}: cannot read it: {exc}") from exc
    file_keys = set(data)
    for key, value in _env_settings(env).items():
        _set_nested(data, key, value)
    if "WORKER_INBOX" in env:
        data["inbox_dir"] = env["WORKER_INBOX"]
    data.update(overrides)
    data["workspace"] = workspace
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, config_path)) from exc
    try:
        check_locations(settings)
    except ConfigError as exc:  # say where the folder was set
        where = "the environment"
        if "WORKER_INBOX" in env:
            where = "WORKER_INBOX"
        elif file_keys & {"inbox_dir", "state_dir"}:
            where = str(config_path)
        raise ConfigError(f"{where}: {exc}") from exc
    return settings


def _env_settings(env: Mapping[str, str]) -> dict[str, Any]:
    """`WORKER_MACHINE_ID=x` -> machine_id; `WORKER_GITHUB__REPOS='["a/b"]'` -> github.repos."""
    found: dict[str, Any] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or name in _NOT_SETTINGS or name == "WORKER_INBOX":
            continue
        key = name[len(ENV_PREFIX) :].lower().replace("__", ".")
        if key == "inbox":
            continue
        value: Any = raw
        if raw[:1] in "[{":
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{name}: not valid JSON: {exc.msg}") from exc
        found[key] = value
    return found


def _set_nested(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = data
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{ENV_PREFIX}{dotted.upper()}: {part} is not a section")
        node = child
    node[leaf] = value


def _describe(exc: ValidationError, config_path: Path) -> str:
    lines = [f"invalid configuration ({config_path.name} or {ENV_PREFIX}* variables):"]
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"]) or "(root)"
        lines.append(f"  {key}: {error['msg']}")
    return "\n".join(lines)
