"""Settings of retention (section `[retention]`): how long history is kept."""

# Annotations evaluated as written, not postponed: worker/config.py says why.

from pydantic import BaseModel, ConfigDict, Field


class RetentionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)  # see worker/config.py

    enabled: bool = True  # at the end of a run, at most every `interval_hours`
    runs_days: float = Field(90.0, gt=0)  # runs, their iterations, ended claims
    decisions_days: float = Field(90.0, gt=0)
    logs_days: float = Field(30.0, gt=0)  # run log folders under <state_dir>/logs
    logs_max_bytes: int = Field(2 * 1024**3, gt=0)  # and at most this much, oldest first
    interval_hours: float = Field(24.0, gt=0)
