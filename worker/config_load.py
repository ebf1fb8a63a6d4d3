"""Reading `worker.toml` and `WORKER_*`: the data read, each key's origin, and the problems a
load found.

`config.load_settings` checks each key of `worker.toml` and each `WORKER_*` variable against the
settings models before it validates them, so an unknown one is named with the closest real
setting ("did you mean `machine_id`?") instead of pydantic's "Extra inputs are not permitted".
What it finds is a `ConfigProblem`: where (the file or the variable), what, and the fix. Which
keys are settings is `config_keys`; where the files are and where each key came from,
`config_origin`.
"""

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from worker.config_keys import ENV_PREFIX, Keys, SectionModel, _close, dotted, env_name, suggestion
from worker.config_origin import CONFIG_VAR, USER_CONFIG, Sources, user_config_path
from worker.errors import ConfigError

# Importable from here as before: the keys' tree and the settings' origin.
__all__ = [
    "CONFIG_VAR",
    "ENV_PREFIX",
    "NOT_SETTINGS",
    "USER_CONFIG",
    "Build",
    "ConfigProblem",
    "Keys",
    "Loader",
    "SectionModel",
    "Sources",
    "describe",
    "dotted",
    "drop",
    "env_name",
    "set_nested",
    "suggestion",
    "user_config_path",
]

# Variables with the prefix that are not settings: secrets (read where they are used, never
# stored), the `--workspace`, `--config` and `--log-level` options, the inbox's short name, and the
# variable worker sets for the Windows shell of its own children
# (worker/process/platform/shell.py).
NOT_SETTINGS = frozenset(
    {
        "WORKER_DASHBOARD_TOKEN",
        "WORKER_GITHUB_TOKEN",
        "WORKER_GIT_TOKEN",
        "WORKER_CONFIG",
        "WORKER_INBOX",
        "WORKER_LOG_LEVEL",
        "WORKER_WORKSPACE",
        "WORKER_SHELL_COMMAND",
    }
)


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with the configuration, written for the person who fixes it."""

    where: str  # the file, or the variable
    message: str  # what is wrong, naming the key
    fix: str  # what to do
    fatal: bool = True  # False: a warning; every command goes on without the key

    def __str__(self) -> str:
        return f"{self.where}: {self.message}; {self.fix}"


class Loader:
    """One load of the settings: the data read from `worker.toml` and the environment, where
    each key came from, and the problems found. Strict (`worker run` and the commands that
    act), a fatal problem raises ConfigError naming every one; lenient (the commands that
    report), the key is left out, its default used, and the problem kept for the report."""

    def __init__(
        self, keys: Keys, config_path: Path, lenient: bool, user_path: Path | None = None
    ) -> None:
        self.keys = keys
        self.config_path = config_path
        self.user_path = user_path
        self.lenient = lenient
        self.problems: list[ConfigProblem] = []
        self.origin: dict[tuple[str, ...], str] = {}  # a key -> the file or variable giving it
        self.files: list[tuple[str, Path, bool]] = []

    def read_files(self, user_layer: str) -> dict[str, Any]:
        """The user file (`user_layer` names it: the user-wide file, or `--config`), then
        `worker.toml` over it, table by table; each key's origin kept."""
        data: dict[str, Any] = {}
        layers = [(user_layer, self.user_path), ("workspace file", self.config_path)]
        for layer, path in layers:
            if path is None:
                continue
            found = self.read_file(path)
            self.files.append((layer, path, path.exists()))
            for leaf in _leaves(found):
                self.origin[leaf] = str(path)
            _merge(data, found)
        return data

    def sources(self) -> Sources:
        return Sources(tuple(self.files), dict(self.origin))

    def add(self, where: str, message: str, fix: str, fatal: bool = True) -> None:
        self.problems.append(ConfigProblem(where, message, fix, fatal))

    def read_file(self, path: Path) -> dict[str, Any]:
        """A settings file as data, less its unknown keys (each one a problem)."""
        if not path.exists():
            return {}
        import tomllib  # only with a worker.toml to read

        try:
            data = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # BOM: Windows
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
            detail = "nested too deep" if isinstance(exc, RecursionError) else str(exc)
            self.add(str(path), f"cannot read it: {detail}", "fix the file (or move it aside)")
            self.raise_if_strict()
            return {}
        for key in list(self.keys.unknown(data)):
            self.add(
                str(path), f"`{dotted(key)}` is not a setting", suggestion(self.keys, key, False)
            )
            drop(data, key)
        return data

    def add_env(self, data: dict[str, Any], env: Mapping[str, str]) -> None:
        """`WORKER_MACHINE_ID=x` -> machine_id; `WORKER_GITHUB__REPOS='["a/b"]'` -> github.repos.
        A variable that is no setting is a warning naming it and the closest setting."""
        for name, raw in env.items():
            if not name.startswith(ENV_PREFIX) or name in NOT_SETTINGS:
                continue
            path = tuple(name[len(ENV_PREFIX) :].lower().split("__"))
            if not self.keys.known(path):
                hint = suggestion(self.keys, path, True)
                others = {n.removeprefix(ENV_PREFIX).lower(): n for n in NOT_SETTINGS}
                best = _close(path[0], [*others, *(self.keys.names(()) or [])])
                if len(path) == 1 and best in others:  # WORKER_GITHUB_TOKN, closer than github
                    hint = f"did you mean `{others[best]}`?"
                self.add(name, "not a worker setting (ignored)", hint, fatal=False)
                continue
            value: Any = raw
            if raw[:1] in "[{":
                try:
                    value = json.loads(raw)
                except (json.JSONDecodeError, RecursionError) as exc:
                    detail = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deep"
                    self.add(name, f"not valid JSON: {detail}", "give a JSON list or object")
                    continue
            if set_nested(data, path, value):
                self.origin[path] = name
            else:
                self.add(name, f"{path[0]} is not a section in {self.config_path.name}", "fix it")

    def where(self, loc: tuple[str, ...]) -> str:
        """The variable that gave the key at `loc` (or a table above it), else the file."""
        for depth in range(len(loc), 0, -1):
            if loc[:depth] in self.origin:
                return self.origin[loc[:depth]]
        return str(self.config_path)

    def validate(self, data: dict[str, Any], build: "Build[_M]") -> "_M":
        """The settings built from `data`; each value refused is a problem (strict: raised;
        lenient: left out, and built again with its default)."""
        for _ in range(3):  # pydantic names every error at once: one pass drops them all
            model, errors = build(data)
            if model is not None and not errors:
                return model
            for loc, message in errors:
                fix = "correct the value, or remove it for the default"
                self.add(self.where(loc), f"{dotted(loc)}: {message}" if loc else message, fix)
            self.raise_if_strict()
            if not all([drop(data, loc) for loc, _ in errors]):
                break
        model, errors = build({"workspace": data["workspace"]})  # the defaults build
        assert model is not None, errors
        return model

    def raise_if_strict(self) -> None:
        fatal = [problem for problem in self.problems if problem.fatal]
        if fatal and not self.lenient:
            raise ConfigError(describe(fatal))


_M = TypeVar("_M", bound=BaseModel)
# Builds the model from data: the model (None when it cannot) and the errors, by key path.
Build = Callable[[dict[str, Any]], tuple[_M | None, list[tuple[tuple[str, ...], str]]]]


def describe(problems: list[ConfigProblem]) -> str:
    if len(problems) == 1:
        return str(problems[0])
    return "\n".join(["invalid configuration:", *(f"  {problem}" for problem in problems)])


def _leaves(data: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, value in data.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, (*path, key))
        else:
            yield (*path, key)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> None:
    """`over`'s keys into `base`, tables merged key by key, any other value replaced."""
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def set_nested(data: dict[str, Any], path: tuple[str, ...], value: Any) -> bool:
    """Put `value` at `path`; False when a key above it holds a value, not a table."""
    *parents, leaf = path
    node = data
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            return False
        node = child
    node[leaf] = value
    return True


def drop(data: dict[str, Any], loc: tuple[Any, ...]) -> bool:
    """Remove the deepest key on `loc` that `data` holds (a list's item: the whole list);
    False when `data` holds none of it."""
    node: Any = data
    found: tuple[dict[str, Any], str] | None = None
    for part in loc:
        if not isinstance(node, dict) or part not in node:
            break
        found = (node, part)
        node = node[part]
    if found is None:
        return False
    del found[0][found[1]]
    return True
