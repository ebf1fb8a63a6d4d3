"""Which keys are settings, and the closest real one to a key that is not.

`Keys` is the tree of settings: the root model and the sections it makes at first use (their
models imported only when a key in them is checked, and all of them only when a key matches
nothing at its own level). A key that is no setting is named with the nearest real one ("did you
mean `machine_id`?"), as `worker.toml` spells it or as its `WORKER_*` variable.
"""

import types
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

ENV_PREFIX = "WORKER_"
# Close enough to name as "did you mean": difflib's own default cutoff.
_CUTOFF = 0.6

# The model of a section by name (config.section_model), for the sections made at first use.
SectionModel = Callable[[str], type[BaseModel]]


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
