"""A database from a newer worker: refused where worker would write (exit 78, both versions
named and what to do), named where it only reports (`status`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import worker
from worker.errors import ConfigError


class SchemaTooNew(ConfigError):
    """The database was migrated by a newer worker: this one would write rows its schema does
    not expect (exit 78)."""


def _too_new(path: Path, component: str, found: int, known: int) -> str:
    return (
        f"the database {path} has the {component} schema at version {found}, newer than this "
        f"worker ({worker.__version__}) knows (version {known}): a newer worker wrote it. "
        "Upgrade worker to the version that wrote it (or later); or, to go on with this one, "
        f"move the state folder {path.parent} aside (its history is kept there). Nothing was "
        "written."
    )


# Set by `tolerating_newer_schema`: the problems found instead of raised.
_NEWER: ContextVar[list[str] | None] = ContextVar("worker_newer_schema", default=None)


@contextmanager
def tolerating_newer_schema() -> Iterator[list[str]]:
    """For a command that only reports (`status`): a database from a newer worker is read as
    it is, its migrations left alone, and each component newer than this worker knows is
    named in the list yielded instead of refused."""
    found: list[str] = []
    token = _NEWER.set(found)
    try:
        yield found
    finally:
        _NEWER.reset(token)


def newer_schema(path: Path, component: str, found: int, known: int) -> None:
    """Raise SchemaTooNew; inside `tolerating_newer_schema`, note it there instead."""
    problem = _too_new(path, component, found, known)
    seen = _NEWER.get()
    if seen is None:
        raise SchemaTooNew(problem)
    if problem not in seen:
        seen.append(problem)
