"""Settings of the GitHub task source (section `[github]`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class GitHubSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    repos: list[str] = Field(default_factory=list)  # "owner/name"; empty = source off
    label: str = "roo-schedulable"
    agent_identity: list[str] = Field(default_factory=lambda: ["Claude Code", "Both", "Any"])
    base_url: str = "https://api.github.com"
    in_progress_label: str = "worker:in-progress"
    trusted_users: list[str] = Field(default_factory=list)
    claim_ttl_s: int = Field(4 * 3600, gt=0)
    open_pr: bool = False
