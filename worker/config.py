"""Settings: embedded defaults < `worker.toml` in the workspace < `WORKER_*` environment.

Every section is a Pydantic model that forbids unknown keys, so a typo in `worker.toml` is a
configuration error that names the key, not a silently ignored setting.
"""

# Not `from __future__ import annotations`, here nor in the sections' modules, the modes and
# the kernel's and domain types: with it every annotation is a string that pydantic (and
# NamedTuple) compile and `eval` as each class is built, about 2 ms of every command's start.

import json
import math
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, overload

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from worker.errors import ConfigError
from worker.folders import check_folders
from worker.sources.github.settings import GitHubSettings
from worker.statedir import check_locations, default_state_dir
from worker.waits.settings import WaitSettings

if TYPE_CHECKING:
    from worker.daemon.settings import DaemonSettings
    from worker.fleet.settings import FleetSettings
    from worker.notify.settings import NotifySettings
    from worker.retention_settings import RetentionSettings
    from worker.review.settings import ReviewSettings
    from worker.supervision.settings import SupervisionSettings

CONFIG_FILE = "worker.toml"
ENV_PREFIX = "WORKER_"
# Variables that are not settings (secrets are read where they are used, never stored here).
_NOT_SETTINGS = {"WORKER_GITHUB_TOKEN", "WORKER_GIT_TOKEN"}


# Upper bounds of durations and amounts: beyond them a value is a typo (or `1e999`, read as
# infinity), and a wait that long overflows the clocks it is handed to (`threading.TIMEOUT_MAX`).
MAX_DURATION_S = 366 * 24 * 3600.0
MAX_COST_USD = 1_000_000.0


def within(value: float, limit: float, unit: str) -> float:
    """`value`, when it is a finite number no greater than `limit`."""
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    if value > limit:
        raise ValueError(f"must be at most {limit:g} {unit}")
    return value


class FallbackSettings(BaseModel):
    """The daily maintenance task: build and test the workspace, repair only what fails."""

    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # see Settings

    enabled: bool = True
    build: list[str] | None = None  # shell commands; None = detect from the project type
    test: list[str] | None = None
    interval_hours: PositiveFloat = 24.0
    command_timeout_s: PositiveFloat = 1800.0
    mode: str = "code-simple"

    @field_validator("interval_hours")
    @classmethod
    def _sane_interval(cls, value: float) -> float:
        return within(value, MAX_DURATION_S / 3600, "hours (one year)")

    @field_validator("command_timeout_s")
    @classmethod
    def _sane_timeout(cls, value: float) -> float:
        return within(value, MAX_DURATION_S, "seconds (one year)")


_S = TypeVar("_S", bound=BaseModel)


class _Section(Generic[_S]):
    """A section made at its first use: one given in worker.toml or the environment is
    validated as the settings load (`load_settings`); one not given is its defaults, built
    when a command first reads it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, settings: None, owner: type) -> "_Section[_S]": ...
    @overload
    def __get__(self, settings: "Settings", owner: type) -> _S: ...
    def __get__(self, settings: "Settings | None", owner: type) -> "_Section[_S] | _S":
        if settings is None:
            return self
        sections = settings._sections
        if self.name not in sections:
            sections[self.name] = section_model(self.name)()
        return sections[self.name]  # type: ignore[return-value]  # made by section_model


class Settings(BaseModel):
    """The whole configuration of one workspace."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # `1e999` is no setting

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
    # The sections a dry run and `status` never read: their models are imported and built
    # at their first read: building them with the rest took about 50 million instructions
    # of every start. The same keys, checks and errors as fields (`load_settings`).
    supervision: ClassVar[_Section["SupervisionSettings"]] = _Section()
    review: ClassVar[_Section["ReviewSettings"]] = _Section()
    daemon: ClassVar[_Section["DaemonSettings"]] = _Section()
    fleet: ClassVar[_Section["FleetSettings"]] = _Section()
    retention: ClassVar[_Section["RetentionSettings"]] = _Section()
    notify: ClassVar[_Section["NotifySettings"]] = _Section()
    _sections: dict[str, BaseModel] = PrivateAttr(default_factory=dict)

    @field_validator("machine_id")
    @classmethod
    def _safe_machine_id(cls, value: str) -> str:
        if any(ch in value for ch in "/\\\0") or value in {".", ".."}:
            raise ValueError("must not contain path separators")
        if not value.isprintable():  # it names files and reaches replies, logs and prompts
            raise ValueError("must not contain control characters (newlines, tabs)")
        return value

    @field_validator("lease_seconds", "iteration_timeout_s", "task_wall_clock_s")
    @classmethod
    def _sane_duration(cls, value: float) -> float:
        return within(value, MAX_DURATION_S, "seconds (one year)")

    @field_validator("task_cost_cap_usd", "daily_cost_cap_usd")
    @classmethod
    def _sane_cost(cls, value: float | None) -> float | None:
        return value if value is None else within(value, MAX_COST_USD, "USD")

    @model_validator(mode="after")
    def _folders(self) -> "Settings":
        check_folders(self)  # ConfigError naming the key: a file where a folder must be
        return self

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

    def with_sections(self, **sections: BaseModel) -> "Settings":
        """A copy with these sections (made at their first use) replaced."""
        copy = self.model_copy()
        copy._sections = {**self._sections, **sections}  # a copy shares the original's dict
        return copy


LAZY_SECTIONS = ("supervision", "review", "daemon", "fleet", "retention", "notify")


def section_model(name: str) -> type[BaseModel]:
    """The model of a section made at its first use, imported only then."""
    if name == "supervision":
        from worker.supervision.settings import SupervisionSettings

        return SupervisionSettings
    if name == "review":
        from worker.review.settings import ReviewSettings

        return ReviewSettings
    if name == "daemon":
        from worker.daemon.settings import DaemonSettings

        return DaemonSettings
    if name == "fleet":
        from worker.fleet.settings import FleetSettings

        return FleetSettings
    if name == "retention":
        from worker.retention_settings import RetentionSettings

        return RetentionSettings
    from worker.notify.settings import NotifySettings

    return NotifySettings


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
        except RecursionError:  # arrays or tables nested thousands deep
            raise ConfigError(f"{config_path}: cannot read it: nested too deep") from None
    file_keys = set(data)
    for key, value in _env_settings(env).items():
        _set_nested(data, key, value)
    if "WORKER_INBOX" in env:
        data["inbox_dir"] = env["WORKER_INBOX"]
    data.update(overrides)
    data["workspace"] = workspace
    given = {name: data.pop(name) for name in LAZY_SECTIONS if name in data}
    settings = _validate(data, given, config_path)
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
            except RecursionError:
                raise ConfigError(f"{name}: not valid JSON: nested too deep") from None
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


def _validate(data: dict[str, Any], given: dict[str, Any], config_path: Path) -> Settings:
    """The settings, with the sections given of those made at their first use validated now;
    ConfigError names the errors of all, in the order of the fields."""
    errors: list[tuple[tuple[str, ...], ValidationError]] = []
    settings = None
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        errors.append(((), exc))
    sections: dict[str, BaseModel] = {}
    for name, value in given.items():
        try:
            sections[name] = section_model(name).model_validate(value)
        except ValidationError as exc:
            errors.append(((name,), exc))
    if settings is None or errors:
        raise ConfigError(_describe(errors, config_path)) from errors[0][1]
    settings._sections.update(sections)
    return settings


def _describe(errors: list[tuple[tuple[str, ...], ValidationError]], config_path: Path) -> str:
    lines = [f"invalid configuration ({config_path.name} or {ENV_PREFIX}* variables):"]
    for section, exc in errors:
        for error in exc.errors():
            key = ".".join(str(part) for part in (*section, *error["loc"])) or "(root)"
            lines.append(f"  {key}: {error['msg']}")
    return "\n".join(lines)
