"""The file `worker cancel` writes into `<state>/control/` (`worker.kernel.control` reads it).

A module of its own, loaded with the first order file written or read: most runs read none,
and a pydantic model costs its class at every start even when its validator is deferred.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from worker.kernel.model import Order

SCHEMA_VERSION = 1


class OrderFile(BaseModel):
    """The file `worker cancel` writes."""

    # Built on first use, not at import.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    schema_version: int = Field(SCHEMA_VERSION, alias="schemaVersion")
    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._-]+$")
    kind: str = Field("control", pattern="^control$")
    action: Order
    task: str = Field(min_length=1, max_length=300)
    reason: str = Field("", max_length=2000)
    sender: str = Field("cli", alias="from")
    created_at: datetime = Field(alias="createdAt")
