"""Reading `worker.toml` and `WORKER_*`: which keys are settings, the closest real one to a key
that is not, and the problems a load found.

`config.load_settings` checks each key of `worker.toml` and each `WORKER_*` variable against the
settings models before it validates them, so an unknown one is named with the closest real
setting ("did you mean `machine_id`?") instead of pydantic's "Extra inputs are not permitted".
What it finds is a `ConfigProblem`: where (the file or the variable), what, and the fix. The
models of the sections made at their first use are imported only when a key in them is checked,
and all of them only when a key matches nothing at its own level.
"""

import json
import sys
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from worker.errors import ConfigError

ENV_PREFIX = "WORKER_"
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
# Close enough to name as "did you mean": difflib's own default cutoff.
_CUTOFF = 0.6

# The model of a section by name (config.section_model), for the sections made at first use.
SectionModel = Callable[[str], type[BaseModel]]


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with the configuration, written for the person who fixes it."""

    where: str  # the file, or the variable
    message: str  # what is wrong, naming the key
    fix: str  # what to do
    fatal: bool = True  # False: a warning; every command goes on without the key

    def __str__(self) -> str:
        return f"{self.where}: {self.message}; {self.fix}"


USER_CONFIG = "config.toml"
CONFIG_VAR = "WORKER_CONFIG"  # `--config FILE`, as the variable the run's children inherit


def user_config_path(env: Mapping[str, str], platform: str = sys.platform) -> Path:
    """The user-wide `config.toml`, where the platform keeps a user's configuration:
    `$XDG_CONFIG_HOME/worker/` (else `~/.config/worker/`), `~/Library/Application Support/
    worker/` on macOS, `%APPDATA%\\worker\\` on Windows."""
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    if platform == "win32":
        appdata = env.get("APPDATA")
        base = Path(appdata) if appdata else home / "AppData" / "Roaming"
    elif platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        xdg = env.get("XDG_CONFIG_HOME", "")
        # The XDG specification ignores a relative path in its variables.
        base = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".config"
    return base / "worker" / USER_CONFIG


@dataclass(frozen=True)
class Sources:
    """Where the settings came from: the files in the order read (lowest first), each with
    whether it was there, and the origin of each key given (a file, a variable, the command
    line); a key with none has its default. Command line > environment > workspace file >
    user file > defaults."""

    files: tuple[tuple[str, Path, bool], ...]  # (layer, path, read)
    origin: Mapping[tuple[str, ...], str]

    def given(self) -> list[tuple[tuple[str, ...], str]]:
        """Each key given, with its origin, in a stable order (leaves only)."""
        keys = sorted(self.origin)
        leaves = [k for k in keys if not any(o[: len(k)] == k and o != k for o in keys)]
        return [(key, self.origin[key]) for key in leaves]


@dataclass(frozen=True)
class Keys:
    """The tree of settings: the root model, and the sections it makes at first use."""

    root: type[BaseModel]
    lazy: tuple[str, ...]
    section: SectionModel

    def model_at(self, path: tuple[str, ...]) -> type[BaseModel] | None:
        """The model whose fields are the keys under `path`; None: any key goes (a table of
        the user's own names, such as `[supervision.tools]`) or `path` is no section."""
        model: type[BaseModel] | None = self.root
        for depth, part in enumerate(path):
            if model is None:
                return None
            if depth == 0 and part in self.lazy:
                model = self.section(part)
                continue
            field = model.model_fields.get(part)
            model = None if field is None else _model_of(field.annotation)
        return model

    def names(self, path: tuple[str, ...]) -> list[str] | None:
        model = self.model_at(path)
        if model is None:
            return None
        names = [name for name in model.model_fields if not (path == () and name == "workspace")]
        return names + list(self.lazy) if path == () else names

    def known(self, path: tuple[str, ...]) -> bool:
        """Whether `path` names a setting (or a key in a table of the user's own names)."""
        for depth, part in enumerate(path):
            names = self.names(path[:depth])
            if names is None:
                return depth > 0  # below a key whose value is a table or a value
            if part not in names:
                return False
        return True

    def unknown(
        self, data: dict[str, Any], path: tuple[str, ...] = ()
    ) -> Iterator[tuple[str, ...]]:
        """The keys of `data` (nested tables too) that are no setting."""
        known = self.names(path)
        if known is None:
            return
        for key, value in data.items():
            if key not in known:
                yield (*path, key)
            elif isinstance(value, dict):
                yield from self.unknown(value, (*path, key))

    def closest(self, path: tuple[str, ...]) -> tuple[str, ...] | None:
        """The real setting nearest to the unknown key at `path`: a close spelling at the same
        level, a name holding the key as a word (`id` -> `machine_id`), else the same name in
        another section (`interval_s` -> `daemon.interval_s`)."""
        near = self.near(path)
        if near is not None:
            return near
        key = path[-1]
        everywhere = list(self._all(()))
        same = [found for found in everywhere if found[-1] == key]
        if same:
            return same[0]
        leaves = {found[-1]: found for found in reversed(everywhere)}
        match = _close(key, list(leaves))
        return leaves[match] if match is not None else None

    def near(self, path: tuple[str, ...]) -> tuple[str, ...] | None:
        """A setting at the same level as `path` spelled close to it, or holding its key as a
        word of its name."""
        *parents, key = path
        here = self.names(tuple(parents)) or []
        match = _close(key, here) or next((n for n in here if key in n.split("_")), None)
        return None if match is None else (*parents, match)

    def _all(self, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        for name in self.names(path) or []:
            yield (*path, name)
            if self.model_at((*path, name)) is not None:
                yield from self._all((*path, name))


def _close(key: str, names: Iterable[str]) -> str | None:
    import difflib  # only with a key to name: 1 ms of every start otherwise

    found = difflib.get_close_matches(key, list(names), n=1, cutoff=_CUTOFF)
    return found[0] if found else None


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (`Model`, `Model | None`); None for a dict, a list, a value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                return arg
    return None


def env_name(path: tuple[str, ...]) -> str:
    """`("github", "repos")` -> `WORKER_GITHUB__REPOS`."""
    return ENV_PREFIX + "__".join(part.upper() for part in path)


def dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


def suggestion(keys: Keys, path: tuple[str, ...], as_env: bool) -> str:
    """`did you mean `machine_id`?` (or the variable's name), or a pointer to the list."""
    found = keys.closest(path)
    if found is None:
        return "see the README's Configuration section for the settings"
    return f"did you mean `{env_name(found) if as_env else dotted(found)}`?"


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
