"""The crontab times that fire every `interval`, exactly, or why cron cannot. Pure.

Cron matches the clock, not the time since the last run: `*/7` in the minute field fires at
:00, :07, ... :56 and again at :00 (a 4-minute gap), and `*/25` in the hour field fires at 00:00
only. An interval fires evenly in cron when it divides a day (the firings of one day are the
next day's too) or is a week (`0 0 * * 0`): a whole number of minutes that divides 1440 gives
one line per minute of the hour it fires at, each with its hours as a step (90 minutes:
`0 0-23/3` and `30 1-23/3`). Any other interval is refused with the nearest ones that work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DAY_MIN = 24 * 60
WEEK_MIN = 7 * DAY_MIN
# Every interval cron fires evenly, in minutes: the divisors of a day, and a week.
EVEN = (*(m for m in range(1, DAY_MIN + 1) if DAY_MIN % m == 0), WEEK_MIN)


@dataclass(frozen=True)
class Refusal:
    """An interval cron cannot fire evenly, and the nearest ones it can (in minutes)."""

    interval_s: float
    below: int | None
    above: int | None

    def message(self) -> str:
        nearest = " or ".join(
            f"{human(m)} (interval_s = {m * 60})" for m in (self.below, self.above) if m
        )
        return (
            f"cron cannot run worker every {human_s(self.interval_s)}: it matches the clock, "
            "so only an interval that divides a day (or a week) fires evenly. Set [daemon] "
            f"interval_s to the nearest that does, {nearest}; or keep the interval with "
            "`worker schedule systemd` (a timer, OnUnitActiveSec=), `worker schedule windows` "
            "or `worker serve`."
        )


def cron_times(interval_s: float) -> list[str] | Refusal:
    """The first five fields of each crontab line that together fire every `interval_s`."""
    minutes = interval_s / 60
    if minutes != int(minutes) or int(minutes) not in EVEN:
        return nearest(interval_s)
    step = int(minutes)
    if step == WEEK_MIN:
        return ["0 0 * * 0"]
    if 60 % step == 0:
        return [f"*/{step} * * * *" if step > 1 else "* * * * *"]
    # Firings at k*step minutes of the day; those at one minute of the hour are lcm/60 h apart.
    hours_step = math.lcm(step, 60) // 60
    return [
        f"{minute} {_hours(hour, hours_step)} * * *"
        for hour, minute in (divmod(start, 60) for start in range(0, hours_step * 60, step))
    ]


def _hours(first: int, step: int) -> str:
    """The hour field for every `step` hours from `first` (step divides 24)."""
    if step == 1:
        return "*"
    if step == 24:
        return str(first)
    return f"*/{step}" if first == 0 else f"{first}-23/{step}"


def nearest(interval_s: float) -> Refusal:
    minutes = interval_s / 60
    below = [m for m in EVEN if m < minutes]
    above = [m for m in EVEN if m > minutes]
    return Refusal(interval_s, below[-1] if below else None, above[0] if above else None)


def human(minutes: int) -> str:
    """`90` -> `90 min`, `1440` -> `1 day`, `120` -> `2 h`."""
    if minutes % DAY_MIN == 0:
        days = minutes // DAY_MIN
        return f"{days} day{'s' if days > 1 else ''}"
    if minutes % 60 == 0:
        return f"{minutes // 60} h"
    return f"{minutes} min"


def human_s(seconds: float) -> str:
    return human(int(seconds // 60)) if seconds % 60 == 0 else f"{seconds:g} s"
