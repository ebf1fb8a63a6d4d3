"""The anomaly record every detector emits, and the severity levels."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

WARN = "warn"
URGENT = "urgent"
EMERGENCY = "emergency"
SEVERITY = {WARN: 1, URGENT: 2, EMERGENCY: 3}


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One sighting of a pattern: what, how bad, where it starts, and the evidence.

    `start` and `at` are positions in the event sequence of the task (from 0); `start_line`
    is the stream line of the first event of the pattern (the transcript's line, from 0).
    The episode is (kind, key, start): a streak that breaks and forms again is a new one.
    """

    kind: str
    level: str
    key: str
    start: int
    at: int
    count: int
    start_line: int = 0
    evidence: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def episode(self) -> tuple[str, str, int]:
        return (self.kind, self.key, self.start)

    @property
    def severity(self) -> int:
        return SEVERITY.get(self.level, 0)

    def summary(self) -> str:
        """One line for reports and `finish()`: kind, level, count, where it starts."""
        what = self.evidence.get("tool") or self.evidence.get("tools") or self.key
        if isinstance(what, list):
            what = ",".join(str(item) for item in what)
        return f"{self.kind} ({self.level}) ×{self.count} {what} from event {self.start}"


Evidence = dict[str, Any] | Callable[[], dict[str, Any]]


class Sighting:
    """A pattern while it lasts (a streak, the context's episode), as last sighted.

    A long loop is sighted again at every result, each time one longer: the detectors update
    its Sighting in place rather than build an Anomaly each time, and a caller that wants the
    record asks `anomaly()`. A new episode (another kind, key or start) is a new Sighting. The
    evidence may be a function that builds it, called only when the record is asked for.
    """

    __slots__ = ("at", "count", "evidence", "key", "kind", "level", "line", "start")

    def __init__(
        self,
        kind: str,
        level: str,
        key: str,
        start: int,
        at: int,
        count: int,
        line: int,
        evidence: Evidence,
    ) -> None:
        self.kind, self.level, self.key, self.start = kind, level, key, start
        self.at, self.count, self.line, self.evidence = at, count, line, evidence

    @classmethod
    def of(cls, anomaly: Anomaly) -> Sighting:
        return cls(*(getattr(anomaly, name) for name in _FIELDS))

    def anomaly(self) -> Anomaly:
        """The Anomaly of the latest sighting."""
        evidence = self.evidence
        return _anomaly(
            self.kind,
            self.level,
            self.key,
            self.start,
            self.at,
            self.count,
            self.line,
            evidence if isinstance(evidence, dict) else evidence(),
        )


_FIELDS = ("kind", "level", "key", "start", "at", "count", "start_line", "evidence")


def _anomaly_builder() -> Callable[[str, str, str, int, int, int, int, dict[str, Any]], Anomaly]:
    # A frozen dataclass's __init__ sets each field through `object.__setattr__`, about 1 µs:
    # this fills the same slots through their own descriptors (held in the closure) in half
    # the time. The object is an Anomaly like any other: its equality, hash and repr are the
    # class's own.
    new = object.__new__
    kind_, level_, key_, start_, at_, count_, line_, evidence_ = (
        Anomaly.__dict__[name].__set__ for name in _FIELDS
    )

    def build(
        kind: str,
        level: str,
        key: str,
        start: int,
        at: int,
        count: int,
        start_line: int,
        evidence: dict[str, Any],
    ) -> Anomaly:
        anomaly = new(Anomaly)
        kind_(anomaly, kind)
        level_(anomaly, level)
        key_(anomaly, key)
        start_(anomaly, start)
        at_(anomaly, at)
        count_(anomaly, count)
        line_(anomaly, start_line)
        evidence_(anomaly, evidence)
        return anomaly

    return build


# `Anomaly(kind, level, key, start, at, count, start_line, evidence)`, built faster.
_anomaly = _anomaly_builder()
