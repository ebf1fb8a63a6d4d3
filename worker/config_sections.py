"""The sections of the settings made at their first use: a dry run and `status` never read
them, so their models are imported and built only when a command first does.
"""

# Not `from __future__ import annotations`, here nor in the sections' modules, the modes and
# the kernel's and domain types: with it every annotation is a string that pydantic (and
# NamedTuple) compile and `eval` as each class is built, about 2 ms of every command's start.

from typing import TYPE_CHECKING, Generic, TypeVar, overload

from pydantic import BaseModel

if TYPE_CHECKING:
    from worker.config import Settings


_S = TypeVar("_S", bound=BaseModel)


class Section(Generic[_S]):
    """A section made at its first use: one given in worker.toml or the environment is
    validated as the settings load (`load_settings`); one not given is its defaults, built
    when a command first reads it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, settings: None, owner: type) -> "Section[_S]": ...
    @overload
    def __get__(self, settings: "Settings", owner: type) -> _S: ...
    def __get__(self, settings: "Settings | None", owner: type) -> "Section[_S] | _S":
        if settings is None:
            return self
        sections = settings._sections
        if self.name not in sections:
            sections[self.name] = section_model(self.name)()
        return sections[self.name]  # type: ignore[return-value]  # made by section_model


LAZY_SECTIONS = ("supervision", "review", "daemon", "fleet", "retention", "notify", "sandbox")


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
        from worker.state.retention_settings import RetentionSettings

        return RetentionSettings
    if name == "sandbox":
        from worker.sandbox.settings import SandboxSettings

        return SandboxSettings
    from worker.operator.notify.settings import NotifySettings

    return NotifySettings
