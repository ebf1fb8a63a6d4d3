"""Durations for people: `45 s`, `12 min`, `3.5 h`, `4 d`. One format everywhere."""

from __future__ import annotations

import re
from datetime import UTC, datetime

# What a wait-state condition waits for, in words (`worker waits list`, `worker status`).
CONDITION_WORDS = {
    "user_approval": "an approval",
    "intercom_message": "a local message",
    "roosync_response": "a reply in the inbox",
    "github_decision": "a decision on GitHub",
    "time": "a moment",
    "pull_request": "its pull request",
}


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} d"


def moment(at: str | float | datetime | None, now: datetime | None = None) -> str:
    """`2026-11-26 06:15 UTC (3 h ago)`, `... (in 6 d)`; `-` for none. ISO text, epoch seconds
    or a datetime; a time without a zone is UTC."""
    if at is None or at == "":
        return "-"
    when = _as_datetime(at)
    now = now or datetime.now(UTC)
    delta = (when - now).total_seconds()
    if abs(delta) < 30:
        rel = "now"
    else:
        rel = f"in {duration(delta)}" if delta > 0 else f"{duration(-delta)} ago"
    return f"{when.astimezone(UTC):%Y-%m-%d %H:%M} UTC ({rel})"


def yes_no(value: object) -> str:
    return "yes" if value else "no"


def _as_datetime(at: str | float | datetime) -> datetime:
    if isinstance(at, datetime):
        when = at
    elif isinstance(at, int | float):
        when = datetime.fromtimestamp(at, UTC)
    else:
        when = datetime.fromisoformat(at)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


# What a terminal would obey rather than show: C0 controls but newline and tab (ESC opens OSC 52
# clipboard writes, title and clear-screen sequences; CR and backspace overwrite what was
# printed), DEL, C1 controls (CSI/OSC in one byte), and the marks that reorder text on screen.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """`text` for a terminal: every control character shown as its escape (`\\x1b`, `\\u202e`),
    never sent raw. An agent's text (a STATUS reason, a question, a summary) goes through here
    on its way to the screen."""
    return _CONTROL.sub(_escape, text)


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
