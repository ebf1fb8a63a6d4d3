"""The supervisor's memory of one task: episodes, the PACE ladder, cooldowns, radio checks.

Both the live supervisor (supervisor.py) and the post-mortem (`worker inspect`) drive a
`Watch`, so a transcript replayed through inspect gets exactly the judgements the run got.
The only thing that differs is the clock of the cooldown: iterations live (that is when a
message can reach the agent), agent turns in a replay.
"""

from __future__ import annotations

from dataclasses import dataclass

from worker.models import AgentEvent
from worker.supervision.anomaly import EMERGENCY, URGENT, WARN, Anomaly
from worker.supervision.detectors import StreamDetectors
from worker.supervision.ladder import pace_level, pace_rank, pace_why
from worker.supervision.settings import SupervisionSettings
from worker.supervision.steering import Cooldowns, message, pace_message, stop_reason

# Loop-like kinds: an urgent one during an iteration means the agent is spinning right now,
# so the radio check cuts it short rather than let it run to the iteration's timeout.
STOP_KINDS = frozenset(
    {
        "loop",
        "repeated_error",
        "edit_failure",
        "repeated_message",
        "oscillation",
        "cycle",
        "cli_error",
    }
)
_PACE_SEVERITY = {"alternate": WARN, "contingent": URGENT, "emergency": EMERGENCY}


@dataclass
class Steering:
    """A message the supervisor gives (or would give, when `suppressed` by the cooldown)."""

    kind: str
    level: str
    text: str
    suppressed: bool
    anomaly: Anomaly | None = None  # None for PACE messages


class Watch:
    def __init__(self, settings: SupervisionSettings, model: str | None = None) -> None:
        self.s = settings
        self.detectors = StreamDetectors(settings, model)
        self.episodes: dict[tuple[str, str, int], Anomaly] = {}  # latest sighting of each
        self.escalations = 0
        self.cooldowns = Cooldowns(settings.cooldown_turns)
        self._pending: dict[tuple[str, str, int], Anomaly] = {}  # sighted since last drain
        self._urgent: Anomaly | None = None  # an urgent loop-like sighting, for the radio check
        self._pace_stopped = False
        self._pace_counts: tuple[int, int] | None = None  # (escalations, episodes) of _pace
        self._pace = ""

    @property
    def anomaly_count(self) -> int:
        return len(self.episodes)

    def observe(self, event: AgentEvent) -> list[Anomaly]:
        found = self.detectors.observe(event)
        for anomaly in found:
            self.note(anomaly)
        return found

    def note(self, anomaly: Anomaly) -> None:
        """Record a sighting (from the detectors, or an iteration-level judgement)."""
        episode = anomaly.episode
        self.episodes[episode] = self._pending[episode] = anomaly
        if anomaly.level != WARN and anomaly.kind in STOP_KINDS and self._urgent is None:
            self._urgent = anomaly

    def drain(self) -> list[Anomaly]:
        """The anomalies sighted since the last drain (their latest sightings)."""
        found = list(self._pending.values())
        self._pending.clear()
        return found

    def pace(self) -> str:
        counts = (self.escalations, len(self.episodes))
        if counts != self._pace_counts:  # asked at every radio check: worked out on a change
            self._pace_counts, self._pace = counts, pace_level(*counts, self.s.pace)
        return self._pace

    def radio_check(self) -> str | None:
        """The periodic review during an iteration: a stop reason, or None to let it run."""
        urgent, self._urgent = self._urgent, None
        if urgent is not None and self.s.stop_on_urgent:
            return stop_reason(urgent)
        if self.pace() == EMERGENCY and not self._pace_stopped:
            self._pace_stopped = True
            why = pace_why(self.escalations, self.anomaly_count)
            return f"supervisor emergency: PACE emergency after {why}"
        return None

    def end_iteration(self) -> None:
        """The agent has stopped on its own: an urgent sighting no longer calls for a stop."""
        self._urgent = None

    def steer(self, anomalies: list[Anomaly], turn: int) -> list[Steering]:
        """One message per anomaly kind (its strongest sighting), the cooldown applied."""
        ordered = anomalies  # one, as a replay asks for each new finding: nothing to choose
        if len(anomalies) > 1:
            strongest: dict[str, Anomaly] = {}
            for anomaly in anomalies:
                best = strongest.get(anomaly.kind)
                if best is None or (anomaly.severity, anomaly.count) > (best.severity, best.count):
                    strongest[anomaly.kind] = anomaly
            ordered = sorted(strongest.values(), key=lambda a: (-a.severity, a.start))
        return [
            Steering(
                a.kind,
                a.level,
                message(a, self.s),
                not self.cooldowns.admit(a.kind, turn, a.level, a.count),
                a,
            )
            for a in ordered
        ]

    def steer_pace(self, turn: int) -> Steering | None:
        """The PACE guidance when the level is at or above `inject_from`; emergency always."""
        level = self.pace()
        if pace_rank(level) < pace_rank(self.s.pace.inject_from):
            return None
        if level == EMERGENCY:
            self._pace_stopped = True  # told to wrap up: let it report, do not cut it short
        severity = _PACE_SEVERITY.get(level, WARN)
        rank = pace_rank(level)
        suppressed = not self.cooldowns.admit("pace", turn, severity, rank)
        text = pace_message(level, pace_why(self.escalations, self.anomaly_count), self.s)
        return Steering("pace", severity, text, suppressed)


def select(steering: list[Steering], limit: int) -> list[str]:
    """The lines for the next prompt: unsuppressed, most severe first, emergencies always."""
    given = [s for s in steering if not s.suppressed]
    given.sort(key=lambda s: -{WARN: 1, URGENT: 2, EMERGENCY: 3}.get(s.level, 0))
    kept = [s for s in given if s.level == EMERGENCY]
    kept += [s for s in given if s.level != EMERGENCY][: max(0, limit - len(kept))]
    return [s.text for s in kept]
