"""Issue 16, fifth round: the PACE level is worked out when its counts change, not at every ask.

A replay asks `Watch.pace` at every radio check (every 10 events); the level is kept with the
counts it was worked out from (mode escalations, anomaly episodes) and held here to
`pace_level` of the counts of the moment.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from worker.supervision.anomaly import WARN, Anomaly
from worker.supervision.ladder import pace_level
from worker.supervision.settings import SupervisionSettings
from worker.supervision.watch import Watch

# Each step: a new escalation count, or this many new anomaly episodes.
STEPS = st.lists(
    st.one_of(st.integers(0, 6).map(lambda n: ("escalations", n)), st.integers(0, 4)),
    max_size=20,
)


@given(STEPS)
def test_the_pace_is_the_level_of_the_counts_of_the_moment(steps: list[object]) -> None:
    """Whatever the escalations and episodes do (up, down, back), pace() is pace_level of
    them, asked once or twice."""
    settings = SupervisionSettings()
    watch = Watch(settings)
    start = 0
    for step in steps:
        if isinstance(step, tuple):
            watch.escalations = step[1]
        else:
            for _ in range(step):
                watch.note(Anomaly("loop", WARN, "k", start, start, 3))
                start += 1
        for _ in range(2):
            expected = pace_level(watch.escalations, len(watch.episodes), settings.pace)
            assert watch.pace() == expected
