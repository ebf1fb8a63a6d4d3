"""Settings: embedded defaults < the user-wide `config.toml` (or `--config FILE`) <
`worker.toml` in the workspace < `WORKER_*` environment < the command line.

Every section is a Pydantic model that forbids unknown keys, so a typo in `worker.toml` is a
configuration error that names the key and the closest real one (`config_load`), not a silently
ignored setting; a `WORKER_*` variable that is no setting is a warning that names it.
"""

# Not `from __future__ import annotations`, here nor in the sections' modules, the modes and
# the kernel's and domain types: with it every annotation is a string that pydantic (and
# NamedTuple) compile and `eval` as each class is built, about 2 ms of every command's start.

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

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

from worker.config_bounds import MAX_COST_USD, MAX_DURATION_S, within
from worker.config_fallback import FallbackSettings
from worker.config_load import (
    CONFIG_VAR,
    ConfigProblem,
    Keys,
    Loader,
    Sources,
    user_config_path,
)
from worker.config_sections import LAZY_SECTIONS, Section, section_model
from worker.errors import ConfigError
from worker.sources.github.settings import GitHubSettings
from worker.state.folders import check_folders
from worker.state.statedir import default_state_dir, location_problem
from worker.waits.settings import WaitSettings

__all__ = [
    "CONFIG_FILE",
    "LAZY_SECTIONS",
    "MAX_COST_USD",
    "MAX_DURATION_S",
    "FallbackSettings",
    "Settings",
    "load_settings",
    "section_model",
    "within",
]

if TYPE_CHECKING:
    from worker.daemon.settings import DaemonSettings
    from worker.fleet.settings import FleetSettings
    from worker.operator.notify.settings import NotifySettings
    from worker.review.settings import ReviewSettings
    from worker.sandbox.settings import SandboxSettings
    from worker.state.retention_settings import RetentionSettings
    from worker.supervision.settings import SupervisionSettings

CONFIG_FILE = "worker.toml"


class Settings(BaseModel):
    """The whole configuration of one workspace."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # `1e999` is no setting

    workspace: Path
    machine_id: str = Field(default_factory=socket.gethostname, min_length=1)
    inbox_dir: Path | None = None  # None: `<state>/inbox`, outside the working tree
    allow_inbox_in_workspace: bool = False
    inbox_delivery: Literal["in_place", "branch"] = "in_place"  # worker/delivery.py
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
    # Tasks at once in this workspace, each in a slot of its own (worker/run/slots.py); 1 is
    # one run at a time under the workspace lock.
    max_parallel: PositiveInt = 1
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
    supervision: ClassVar[Section["SupervisionSettings"]] = Section()
    review: ClassVar[Section["ReviewSettings"]] = Section()
    daemon: ClassVar[Section["DaemonSettings"]] = Section()
    fleet: ClassVar[Section["FleetSettings"]] = Section()
    retention: ClassVar[Section["RetentionSettings"]] = Section()
    notify: ClassVar[Section["NotifySettings"]] = Section()
    sandbox: ClassVar[Section["SandboxSettings"]] = Section()
    _sections: dict[str, BaseModel] = PrivateAttr(default_factory=dict)
    _problems: tuple[ConfigProblem, ...] = PrivateAttr(default=())
    _sources: Sources | None = PrivateAttr(default=None)  # None: not built by load_settings

    @field_validator("machine_id")
    @classmethod
    def _safe_machine_id(cls, value: str) -> str:
        if any(ch in value for ch in "/\\\0") or value in {".", ".."}:
            raise ValueError("must not contain path separators")
        if not value.isprintable():  # it names files and reaches replies, logs and prompts
            raise ValueError("must not contain control characters (newlines, tabs)")
        return value

    @property
    def problems(self) -> tuple[ConfigProblem, ...]:
        """What the load found: unknown variables (warnings), and with `lenient` the keys left
        out. Empty when the settings are as given."""
        return self._problems

    @property
    def sources(self) -> Sources | None:
        """Where each setting came from (`worker doctor` shows it)."""
        return self._sources

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
        """`<state>/wait_states`: not in the user's repository (an untracked folder there),
        and out of the agent's reach; `wait_states_dir` puts it elsewhere."""
        if self.wait_states_dir is None:
            return self.state / "wait_states"
        return self._resolve(self.wait_states_dir, "")

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


def load_settings(
    workspace: Path,
    env: Mapping[str, str] | None = None,
    *,
    lenient: bool = False,
    **overrides: Any,
) -> Settings:
    """Read `worker.toml` and the environment. A `WORKER_*` variable that is no setting is a
    warning (in `settings.problems`, naming the closest setting). Any other problem raises
    ConfigError naming the key and its fix; `lenient` (the commands that report: doctor,
    status, log, inspect) leaves the key out instead, keeps the problem in `settings.problems`
    and goes on with the default, so the report still comes."""
    env = os.environ if env is None else env
    workspace = workspace.resolve()
    if not workspace.is_dir():
        raise ConfigError(f"workspace {workspace} is not a folder (--workspace)")
    keys = Keys(Settings, LAZY_SECTIONS, section_model)
    explicit = env.get(CONFIG_VAR)  # `--config FILE`, in place of the user-wide file
    user = Path(explicit).expanduser() if explicit else user_config_path(env)
    loader = Loader(keys, workspace / CONFIG_FILE, lenient, user)
    if explicit and not user.is_file():
        loader.add(f"--config {explicit}", "no such file", "give the path of a config.toml")
        loader.raise_if_strict()
    data = loader.read_files("--config file" if explicit else "user file")
    loader.add_env(data, env)
    if "WORKER_INBOX" in env:
        data["inbox_dir"] = env["WORKER_INBOX"]
        loader.origin[("inbox_dir",)] = "WORKER_INBOX"
    data.update(overrides)
    loader.origin.update(dict.fromkeys([(key,) for key in overrides], "command line"))
    data["workspace"] = workspace
    settings = loader.validate(data, _build)
    problem = location_problem(settings)
    if problem is not None:
        key = "inbox_dir" if settings.inbox_dir is not None else "state_dir"
        where = loader.where((key,)) if key in data else str(workspace)
        loader.add(where, *problem)
    loader.raise_if_strict()
    settings._problems = tuple(loader.problems)
    settings._sources = loader.sources()
    return settings


def _build(data: dict[str, Any]) -> tuple[Settings | None, list[tuple[tuple[str, ...], str]]]:
    """The settings, with the sections given of those made at their first use validated now;
    else the errors of all, in the order of the fields, each by its key's path."""
    data = dict(data)
    given = {name: data.pop(name) for name in LAZY_SECTIONS if name in data}
    errors: list[tuple[tuple[str, ...], str]] = []
    settings = None
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        errors += [(_loc(error["loc"]), error["msg"]) for error in exc.errors()]
    except ConfigError as exc:  # a check of the whole (its message names the key)
        errors.append(((), str(exc)))
    sections: dict[str, BaseModel] = {}
    for name, value in given.items():
        try:
            sections[name] = section_model(name).model_validate(value)
        except ValidationError as exc:
            errors += [((name, *_loc(error["loc"])), error["msg"]) for error in exc.errors()]
    if settings is not None and not errors:
        settings._sections.update(sections)
    return settings, errors


def _loc(loc: tuple[int | str, ...]) -> tuple[str, ...]:
    return tuple(str(part) for part in loc)
