"""Iteration-level judgements: the stall counter and the PACE escalation ladder. Pure."""

from __future__ import annotations

from worker.supervision.settings import PACE_LEVELS, PaceSettings

_RANKS: dict[str, int] = {level: rank for rank, level in enumerate(PACE_LEVELS)}


def stall_step(counter: int, progressed: bool) -> int:
    """One iteration of the stall counter: +1 without progress, -1 with it (never below 0).

    Decrementing rather than resetting is Magentic-One's rule: one lucky
    change does not wipe out a long stall.
    """
    return max(0, counter - 1) if progressed else counter + 1


def pace_level(escalations: int, anomalies: int, pace: PaceSettings) -> str:
    """The highest PACE level either count reaches: mode escalations or anomaly episodes."""
    level = PACE_LEVELS[0]
    for candidate in PACE_LEVELS[1:]:
        by_escalation = pace.escalations.get(candidate)
        by_anomalies = pace.anomalies.get(candidate)
        if (by_escalation is not None and escalations >= by_escalation) or (
            by_anomalies is not None and anomalies >= by_anomalies
        ):
            level = candidate
    return level


def pace_rank(level: str) -> int:
    return _RANKS.get(level, 0)


def pace_why(escalations: int, anomalies: int) -> str:
    """The evidence half of a PACE message."""
    parts = []
    if escalations:
        parts.append(f"{escalations} mode escalation{'s' if escalations != 1 else ''}")
    parts.append(f"{anomalies} anomal{'ies' if anomalies != 1 else 'y'} so far")
    return " and ".join(parts)
