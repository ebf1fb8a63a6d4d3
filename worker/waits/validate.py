"""What a wait state must hold to be kept: pure checks, used when a wait is written (from the
agent's STATUS block, a usage limit, a pause) and again when its file is read.

A wait that fails them is never guessed at: an unknown `resumeWhen` would never resume, an
unparsable `time:` moment would resume at once, and a date in year 9999 overflows the first
expiry computed from it. The message names the field.
"""

from __future__ import annotations

from datetime import UTC, datetime

# The version of these checks. worker records which version each wait passed when it was
# written, and reads a recorded wait of the current version back without running them again
# (the model's own types and constraints still run on every read): change what a check here
# accepts, and this number goes up (the older records are then checked anew).
RULES = 1

CONDITIONS = (
    "user_approval",
    "roosync_response",
    "github_decision",
    "intercom_message",
    "time",
    "pull_request",  # worker's own, after it opened a pull request; never the agent's to ask
)

# Dates outside these bounds are typing mistakes or attacks, not waits; the upper bound leaves
# room for any expiry arithmetic (Python's datetime ends in year 9999).
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)


def aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def check_moment(value: datetime) -> datetime:
    """The date itself, or ValueError when it lies outside [EARLIEST, LATEST)."""
    if not EARLIEST <= aware(value) < LATEST:
        raise ValueError(
            f"{value.isoformat()} is out of range ({EARLIEST.year} to {LATEST.year - 1})"
        )
    return value


def parse_resume_when(text: str) -> tuple[str, datetime | None]:
    """`resumeWhen` as (condition, moment): `time:2026-11-27T08:00:00Z` is ("time", that
    moment). ValueError for an unknown condition or a `time:` moment that is not ISO 8601."""
    kind, _, rest = text.strip().partition(":")
    kind = kind.strip().lower()
    if kind not in CONDITIONS:
        known = ", ".join(CONDITIONS)
        raise ValueError(f"unknown condition {text.strip()[:60]!r} (known: {known})")
    if kind != "time" or not rest.strip():
        return kind, None
    try:
        moment = datetime.fromisoformat(rest.strip())
    except ValueError:
        raise ValueError(
            f"time moment {rest.strip()[:60]!r} is not an ISO 8601 date "
            "(e.g. time:2026-11-27T08:00:00Z)"
        ) from None
    return kind, aware(check_moment(moment))


def check_time_has_moment(resume_when: str, resume_at: datetime | None) -> None:
    """A `time` wait needs a moment, else it would resume at once."""
    kind, moment = parse_resume_when(resume_when)
    if kind == "time" and moment is None and resume_at is None:
        raise ValueError("resumeWhen: 'time' needs a moment: resumeAt, or time:<ISO 8601>")
