"""Settings of the fleet database (section `[fleet]`) and the one way a URL is shown."""

# Annotations evaluated as written, not postponed: worker/config.py says why.

import re

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat, field_validator

from worker.secrets import redact_url


class FleetSettings(BaseModel):
    """Many machines, one PostgreSQL: claims, leases, history, reports and orders."""

    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    # postgresql://user[:password]@host[:port]/db; None = one machine, SQLite only. Prefer
    # WORKER_FLEET__DATABASE_URL or ~/.pgpass to a password written in worker.toml.
    database_url: str | None = None
    connect_timeout_s: int = Field(5, ge=1, le=120)
    heartbeat_s: PositiveFloat = 15.0  # renew leases and publish the status this often
    # No database, an inbox folder synced between machines: claim markers and a settle window
    # (worker.fleet.markers). Ignored when database_url is set.
    synced_inbox: bool = False
    settle_s: NonNegativeFloat = 30.0  # longer than the sync's usual delay

    @field_validator("database_url")
    @classmethod
    def _postgres_only(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if not re.match(r"^postgres(ql)?://", value):
            raise ValueError(f"{redact_url(value)!r} is not a postgresql:// URL")
        return value.strip()

    @property
    def enabled(self) -> bool:
        return self.database_url is not None

    def shown_url(self) -> str:
        return redact_url(self.database_url or "")
