"""Issue 16, sixth round: the shortcuts of this round give what the plain code gives.

A call is looked up in the detectors' memo without the keys its description never reads, a
replay's single new anomaly is steered without choosing among several, and a configured text
is clipped once: each is held here to the plain form it replaces.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from worker.models import AgentEvent, EventKind
from worker.supervision import steering
from worker.supervision.anomaly import Anomaly
from worker.supervision.detectors import StreamDetectors
from worker.supervision.settings import SupervisionSettings
from worker.supervision.watch import Watch

from .test_supervision_kit import described_as_plain

VALUES = st.one_of(
    st.sampled_from(["ls", "ls > out.txt", "sed -i s/a/b/ x", "3f2a9c1e-1b2c-4d5e-8f90-12345678"]),
    st.text(max_size=6),
    st.sampled_from([1, 1.0, True, None]),
    st.lists(st.text(max_size=3), max_size=2),
)
KEYS = st.sampled_from(["command", "description", "id", "file_path", "cmd", "timestamp"])
CALLS = st.lists(
    st.tuples(st.sampled_from(["Bash", "Edit"]), st.dictionaries(KEYS, VALUES, max_size=3)),
    max_size=10,
)


@given(CALLS)
@example([("Bash", {"command": "make", "description": "a"}), ("Bash", {"command": "make"})])
@example([("Bash", {"command": "ls", "id": "a"}), ("Bash", {"command": "ls", "id": 1})])
@example([("Bash", {"id": "a"}), ("Bash", {}), ("Bash", {"id": ["x"]})])
def test_calls_that_differ_in_volatile_keys_only_are_described_as_the_plain_code_does(
    calls: list[Any],
) -> None:
    """Looked up without its volatile keys, a call is still described by canonical_args and
    shell_writes, whatever its volatile values (strings, numbers, lists)."""
    described_as_plain(SupervisionSettings(), calls)


@given(CALLS)
@example([("Bash", {"command": "ls > out.txt"}), ("Bash", {"command": "ls"})])
def test_a_shell_key_made_volatile_still_tells_a_writing_command_apart(calls: list[Any]) -> None:
    """A volatile key that shell_writes reads (`command`, configured volatile) stays in the
    lookup: `ls > out.txt` writes a file and `ls` does not, though both describe as `{}`."""
    settings = SupervisionSettings(volatile_keys=["command", "description"])
    described_as_plain(settings, calls)


def test_a_loop_that_rewords_its_description_is_described_once() -> None:
    """The point of the shortcut: the same command with a new `description` each time is
    looked up, not described again."""
    detectors = StreamDetectors(SupervisionSettings())
    described = []
    real = detectors._describe

    def counting(*args: Any) -> Any:
        described.append(args[0])
        return real(*args)

    detectors._describe = counting  # type: ignore[method-assign]
    for n in range(5):
        args = {"command": "make test", "description": f"try {n}"}
        detectors.observe(
            AgentEvent(EventKind.TOOL_CALL, n, tool="Bash", tool_id=f"t{n}", args=args)
        )
    assert described == ["Bash"]


def _plain_steer(watch: Watch, anomalies: list[Anomaly], turn: int) -> list[Any]:
    strongest: dict[str, Anomaly] = {}
    for anomaly in anomalies:
        best = strongest.get(anomaly.kind)
        if best is None or (anomaly.severity, anomaly.count) > (best.severity, best.count):
            strongest[anomaly.kind] = anomaly
    ordered = sorted(strongest.values(), key=lambda a: (-a.severity, a.start))
    return [
        (
            a.kind,
            a.level,
            steering.message(a, watch.s),
            watch.cooldowns.admit(a.kind, turn, a.level, a.count),
            a,
        )
        for a in ordered
    ]


ANOMALIES = st.lists(
    st.builds(
        Anomaly,
        kind=st.sampled_from(["loop", "stall", "cascade", "context"]),
        level=st.sampled_from(["warn", "urgent"]),
        key=st.just("k"),
        start=st.integers(0, 9),
        at=st.integers(0, 9),
        count=st.integers(1, 9),
        evidence=st.just(
            {
                "tool": "Bash",
                "args": "x",
                "tools": ["a", "b"],
                "window": 5,
                "fill": 0.9,
                "tokens": 9,
                "turns": 3,
            }
        ),
    ),
    min_size=1,
    max_size=4,
)


@given(ANOMALIES, st.integers(0, 30))
def test_steering_gives_what_choosing_the_strongest_of_each_kind_gives(
    anomalies: list[Anomaly], turn: int
) -> None:
    """One anomaly (a replay's new finding) or several (a live iteration's), steer's messages
    are the plain code's, the cooldown asked the same way (two watches, the same history)."""
    settings = SupervisionSettings()
    fast, plain = Watch(settings), Watch(settings)
    for _ in range(2):  # the second time the cooldown holds some back
        given = [
            (s.kind, s.level, s.text, not s.suppressed, s.anomaly)
            for s in fast.steer(anomalies, turn)
        ]
        assert given == _plain_steer(plain, anomalies, turn)


@given(st.text(max_size=80), st.integers(1, 3))
@example("One.  Two! Three? Four.", 2)
def test_a_clipped_text_is_the_plain_split_asked_twice(text: str, sentences: int) -> None:
    for _ in range(2):
        parts = steering._SENTENCE_END.split(text.strip())
        assert steering._clip(text, sentences) == " ".join(parts[:sentences])
