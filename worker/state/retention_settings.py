"""Settings of retention (section `[retention]`): how long history is kept."""

# Annotations evaluated as written, not postponed: worker/config.py says why.

from pydantic import BaseModel, ConfigDict, PositiveFloat, PositiveInt


class RetentionSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    enabled: bool = True  # at the end of a run, at most every `interval_hours`
    runs_days: PositiveFloat = 90.0  # runs, their iterations, ended claims
    decisions_days: PositiveFloat = 90.0
    logs_days: PositiveFloat = 30.0  # run log folders under <state_dir>/logs
    logs_max_bytes: PositiveInt = 2 * 1024**3  # and at most this much, oldest first
    interval_hours: PositiveFloat = 24.0
