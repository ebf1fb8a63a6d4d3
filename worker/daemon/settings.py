"""Settings of `worker serve` and `worker supervise` (section `[daemon]`).

Defaults follow systemd, Kubernetes and Erlang/OTP (each cited in policy.py). Every time constant
is a setting so that tests (and impatient people) can shrink them.
"""

# Annotations evaluated as written, not postponed: worker/config.py says why.

from pathlib import Path
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, model_validator


class DaemonSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    # -- worker serve -------------------------------------------------------------------------
    interval_s: PositiveFloat = 300.0  # sleep between two runs of the batch cycle
    inbox_poll_s: PositiveFloat = 2.0  # a stat() of the inbox folder this often while idle
    heartbeat_s: PositiveFloat = 10.0
    busy_retry_s: PositiveFloat = 30.0  # another run holds the workspace lock: retry after

    # -- worker supervise: restarts -----------------------------------------------------------
    # Kubernetes (KEP-4603): 1 s doubling with jitter, capped at 60 s, reset after 10 min stable.
    backoff_base_s: PositiveFloat = 1.0
    backoff_cap_s: PositiveFloat = 60.0
    backoff_jitter: float = Field(0.1, ge=0, lt=1)  # a delay is shortened by up to this fraction
    backoff_reset_s: PositiveFloat = 600.0
    # Erlang/OTP-style intensity: 5 crashes in 300 s. The window must exceed the backoff sum, or
    # the loop never trips (systemd's 5-in-10 s pitfall); checked below.
    crash_loop_count: int = Field(5, ge=2)
    crash_loop_window_s: PositiveFloat = 300.0
    startup_timeout_s: PositiveFloat = 90.0  # systemd's default TimeoutStartSec
    heartbeat_timeout_s: PositiveFloat = 120.0  # a dozen missed beats: the child is hung
    stop_grace_s: PositiveFloat = 30.0  # SIGTERM, then SIGKILL: time to release the task
    poll_s: PositiveFloat = 1.0  # the supervisor's tick

    # -- worker supervise: revisions ----------------------------------------------------------
    track_revisions: bool = True
    repo: Path | None = None  # the git checkout to watch; None = the one worker runs from
    revision_poll_s: PositiveFloat = 60.0
    stable_window_s: PositiveFloat = 600.0  # Kubernetes backoff reset: 10 min healthy
    build_command: list[str] | None = None  # argv run in the revision's snapshot; None = none
    build_timeout_s: PositiveFloat = 1800.0
    child_command: list[str] | None = None  # None = `python -m worker serve --workspace ...`
    keep_snapshots: int = Field(3, ge=2)

    # -- security -----------------------------------------------------------------------------
    allow_root: bool = False

    @model_validator(mode="after")
    def _window_covers_backoff(self) -> Self:
        # A crash does not reset the backoff (only a stable run does), so a burst of crashes
        # can begin with the delay already at its cap: the worst gap is count-1 capped delays.
        worst = (self.crash_loop_count - 1) * self.backoff_cap_s
        if self.crash_loop_window_s <= worst:
            raise ValueError(
                f"crash_loop_window_s ({self.crash_loop_window_s:g}) must exceed the sum of"
                f" {self.crash_loop_count - 1} backoff delays at their cap ({worst:g} s), or a"
                " crash loop is never detected; raise the window, lower the count or the cap"
            )
        if self.backoff_cap_s < self.backoff_base_s:
            raise ValueError("backoff_cap_s must be at least backoff_base_s")
        return self


def backoff_sum(base: float, cap: float, restarts: int) -> float:
    """The time `restarts` back-to-back restarts take from a fresh start (before jitter)."""
    return sum(min(cap, base * 2**n) for n in range(max(0, restarts)))
