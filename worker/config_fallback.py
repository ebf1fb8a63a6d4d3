"""The `[fallback]` section: the daily maintenance task's settings."""

# Not `from __future__ import annotations`, here nor in the sections' modules, the modes and
# the kernel's and domain types: with it every annotation is a string that pydantic (and
# NamedTuple) compile and `eval` as each class is built, about 2 ms of every command's start.

from pydantic import BaseModel, ConfigDict, PositiveFloat, field_validator

from worker.config_bounds import MAX_DURATION_S, within


class FallbackSettings(BaseModel):
    """The daily maintenance task: build and test the workspace, repair only what fails."""

    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # see Settings

    # None: on where the workspace has checks worker can run (configured, or an environment of
    # the project's own), off elsewhere (worker.sources.fallback.policy says which and why)
    enabled: bool | None = None
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
