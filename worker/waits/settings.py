"""Settings of wait states (section `[waits]`)."""

# Annotations evaluated as written, not postponed: worker/config.py says why.

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat


class WaitSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    # Expire after 7 days by default, at most 30 (GitHub environments wait at most 30 days).
    expiry_days: float = Field(7.0, gt=0, le=30)
    recheck_interval_s: NonNegativeFloat = 300.0
    # `[]`, not `default_factory=list` (worker/config.py says why)
    approvers: list[str] = []
    usage_limit_margin_s: NonNegativeFloat = 120.0
