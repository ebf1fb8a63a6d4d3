"""The settings' upper bounds of durations and amounts, and `within`, which checks a value
against one."""

import math

# Upper bounds of durations and amounts: beyond them a value is a typo (or `1e999`, read as
# infinity), and a wait that long overflows the clocks it is handed to (`threading.TIMEOUT_MAX`).
MAX_DURATION_S = 366 * 24 * 3600.0
MAX_COST_USD = 1_000_000.0


def within(value: float, limit: float, unit: str) -> float:
    """`value`, when it is a finite number no greater than `limit`."""
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    if value > limit:
        raise ValueError(f"must be at most {limit:g} {unit}")
    return value
