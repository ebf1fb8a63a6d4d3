"""Issue 16, third round: the detectors' restructured per-event work gives what the plain
forms gave.

A pattern is sighted in place while it lasts (`Sighting`), and the replay builds an Anomaly
only for a new finding; a call is described once per distinct call; the cascade window's
failures are kept as a flag; the volatile-id hint is one bytes.translate. Each is held here to
the straightforward version, on generated streams and on every recorded transcript.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from worker.models import AgentEvent, EventKind
from worker.supervision import signals
from worker.supervision.anomaly import Anomaly, Sighting
from worker.supervision.detectors import StreamDetectors
from worker.supervision.formats import UnreadableTranscript, read_text
from worker.supervision.ladder import pace_rank
from worker.supervision.postmortem import Finding, InspectReport, Stop, replay
from worker.supervision.settings import SupervisionSettings
from worker.supervision.signals import canonical_args
from worker.supervision.watch import Watch

from .test_supervision_kit import Stream, described_as_plain, settings

TRANSCRIPTS = Path(__file__).parent / "fixtures" / "transcripts"
WRITTEN = Path(__file__).parent / "fixtures" / "transcripts_supervision"


# -- the plain replay: every sighting an Anomaly, noted, looked up, drained -----------------


def _plain_replay(events: list[AgentEvent], s: SupervisionSettings) -> InspectReport:
    """inspect's replay as it was before sightings were kept in place: watch.observe for each
    event, every sighting noted and looked up, the counts kept by the loop."""
    report = InspectReport(path="-", format="claude")
    watch = Watch(s)
    seen: dict[tuple[Any, ...], Finding] = {}
    pace_seen = episodes = since_check = tool_calls = errors = 0
    peak: float | None = None
    for event in events:
        found = watch.observe(event)
        if event.kind is EventKind.TOOL_CALL:
            tool_calls += 1
        elif event.kind is EventKind.USAGE:
            fill = watch.detectors.context_fill
            if fill is not None and (peak is None or fill > peak):
                peak = fill
        elif event.kind is EventKind.ERROR:
            errors += 1
        if found:
            for anomaly in found:
                key = (anomaly.kind, anomaly.key, anomaly.start, anomaly.level)
                finding = seen.get(key)
                if finding is None:
                    steering = watch.steer([anomaly], watch.detectors.turn)[0]
                    finding = seen[key] = Finding(
                        anomaly.kind,
                        anomaly.level,
                        anomaly.start,
                        anomaly.start_line + 1,
                        anomaly.at,
                        anomaly.count,
                        anomaly.count,
                        steering.text,
                        steering.suppressed,
                        {
                            k: round(v, 4) if isinstance(v, float) else v
                            for k, v in anomaly.evidence.items()
                        },
                    )
                    report.findings.append(finding)
                finding.peak = max(finding.peak, anomaly.count)
            watch.drain()
            rank = pace_rank(watch.pace()) if watch.anomaly_count != episodes else pace_seen
            episodes = watch.anomaly_count
            if rank > pace_seen:
                pace_seen = rank
                pace = watch.steer_pace(watch.detectors.turn)
                if pace is not None:
                    seq = watch.detectors.seq
                    report.findings.append(
                        Finding(
                            "pace",
                            pace.level,
                            seq,
                            event.index + 1,
                            seq,
                            watch.anomaly_count,
                            watch.anomaly_count,
                            pace.text,
                            pace.suppressed,
                            {"pace": watch.pace(), "anomalies": watch.anomaly_count},
                        )
                    )
        since_check += 1
        if since_check >= s.radio_check_events:
            since_check = 0
            reason = watch.radio_check() if report.stop is None else None
            if reason is not None:
                report.stop = Stop(watch.detectors.seq, event.index + 1, reason)
    detectors = watch.detectors
    report.events, report.tool_calls, report.errors = detectors.seq + 1, tool_calls, errors
    report.turns, report.tool_failures = detectors.turn, detectors.tool_failures
    report.model = detectors.model
    report.peak_context_fill = round(peak, 4) if peak is not None else None
    report.pace = watch.pace()
    return report


def _recorded() -> list[Path]:
    return sorted(p for folder in (TRANSCRIPTS, WRITTEN) for p in folder.rglob("*") if p.is_file())


def test_every_recorded_transcript_replays_as_the_plain_replay_did() -> None:
    """Over every transcript under tests/fixtures (the labelled corpus included), at the
    default settings and with urgent sightings not stopping the agent, the report is the one
    the plain replay gives, field for field."""
    replayed = 0
    for path in _recorded():
        try:
            _, stream = read_text(path.read_text(encoding="utf-8", errors="replace"))
        except UnreadableTranscript:
            continue
        events = list(stream)
        for s in (SupervisionSettings(), settings(stop_on_urgent=False, stall_turns=5)):
            assert replay(events, s).to_dict() == _plain_replay(events, s).to_dict(), path
        replayed += 1
    assert replayed >= 100


CALLS = st.sampled_from(
    [
        ("Bash", {"command": "make test"}),
        ("Bash", {"command": "make test", "description": "again"}),
        ("Read", {"file_path": "a.py"}),
        ("Read", {"file_path": "b.py"}),
        ("Edit", {"file_path": "a.py", "old_string": "x"}),
        ("Grep", {"pattern": "def", "n": 1}),
        ("Grep", {"pattern": "def", "n": 1.0}),
        ("BashOutput", {"bash_id": "1"}),
    ]
)
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("tool"), CALLS, st.sampled_from([None, "boom 1", "boom 2", "denied"])),
        st.tuples(st.just("usage"), st.integers(0, 200_000)),
        st.tuples(st.just("say"), st.sampled_from(["Let me look at the failing test again now."])),
    ),
    max_size=120,
)


def _story(steps: list[tuple[Any, ...]]) -> list[AgentEvent]:
    stream = Stream().session()
    for step in steps:
        if step[0] == "tool":
            (name, args), error = step[1], step[2]
            if error == "denied":
                error = "The user doesn't want to proceed with this tool use."
            stream.tool(name, args, error=error)
        elif step[0] == "usage":
            stream.usage(step[1])
        else:
            stream.say(step[1])
    return stream.events


@hypothesis_settings(max_examples=150, deadline=None)
@given(STEPS)
def test_generated_stories_replay_as_the_plain_replay_did(steps: list[tuple[Any, ...]]) -> None:
    """Loops, repeated errors, alternations, cascades, context fills and stalls in any order:
    the report is the plain replay's, with and without stops, at low thresholds."""
    events = _story(steps)
    for s in (
        settings(stall_turns=3, cascade_distinct=2),
        settings(stop_on_urgent=False, radio_check_events=1),
    ):
        assert replay(events, s).to_dict() == _plain_replay(events, s).to_dict()


# -- sightings kept in place give the Anomaly records observe gave ---------------------------


def test_observe_gives_a_new_record_at_each_sighting_never_one_changed_later() -> None:
    """A loop sighted again and again: each sighting observe() returned keeps its own count
    and position after the loop has grown; the Sighting behind them is one object."""
    stream = Stream()
    for _ in range(8):
        stream.tool("Bash", {"command": "make"}, error="boom")
    detectors = StreamDetectors(SupervisionSettings())
    loops = [a for e in stream.events for a in detectors.observe(e) if a.kind == "loop"]
    assert [a.count for a in loops] == list(range(3, 9))
    assert [a.at for a in loops] == [8, 11, 14, 17, 20, 23]
    assert len({id(a) for a in loops}) == len(loops)
    assert detectors._live["loop"].count == 8  # the one Sighting, updated in place


FIELDS = st.tuples(
    st.sampled_from(["loop", "context", "stall"]),
    st.sampled_from(["warn", "urgent"]),
    st.text(max_size=20),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3),
)


@given(FIELDS)
def test_a_sighting_s_anomaly_is_the_one_its_constructor_builds(fields: tuple[Any, ...]) -> None:
    """Built through the slots' descriptors, an Anomaly is the class's own: equal, with the
    same hash, repr, fields, evidence object and pickled form, and frozen."""
    built = Sighting(*fields).anomaly()
    plain = Anomaly(*fields)
    assert type(built) is Anomaly
    assert built == plain and hash(built) == hash(plain) and repr(built) == repr(plain)
    assert dataclasses.astuple(built) == dataclasses.astuple(plain)
    assert built.evidence is fields[7]
    assert pickle.loads(pickle.dumps(built)) == plain
    assert Sighting.of(plain).anomaly() == plain
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.count = 1  # type: ignore[misc]


# -- a call described once per distinct call --------------------------------------------------

VALUES = st.one_of(
    st.sampled_from(
        ["", "sed -i s/a/b/ x", "ls > out.txt", "3f2a9c1e-1b2c-4d5e-8f90-123456789abc"]
    ),
    st.text(max_size=12),
    st.sampled_from([1, 1.0, True, 0, 0.0, False, None]),
    st.lists(st.text(max_size=3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
ARGS = st.dictionaries(
    st.sampled_from(["command", "description", "file_path", "id", "n", "cmd"]), VALUES, max_size=3
)


@given(st.lists(st.tuples(st.sampled_from(["Bash", "Edit", "Read"]), ARGS), max_size=12))
@example([("Bash", {"n": 1}), ("Bash", {"n": 1.0}), ("Bash", {"n": True}), ("Bash", {"n": 1})])
@example([("Bash", {"command": "ls", "id": "a"}), ("Bash", {"command": "ls", "id": "b"})])
def test_a_call_is_described_as_canonical_args_and_shell_writes_describe_it(
    calls: list[tuple[str, dict[str, Any]]],
) -> None:
    """Each call, asked twice (the second from the memo, when its arguments are strings), is
    described by the plain functions: 1, 1.0 and True stay apart, volatile keys drop out."""
    described_as_plain(SupervisionSettings(), calls)


def test_keys_that_are_not_strings_are_never_taken_for_equal_ones() -> None:
    """1 == True as dict keys: arguments keyed by them (not from JSON, but possible in a
    trajectory built in code) are encoded apart, however often asked."""
    for _ in range(2):
        assert canonical_args({1: "a"}, ()) == '{"1":"a"}'  # type: ignore[dict-item]
        assert canonical_args({True: "a"}, ()) == '{"true":"a"}'  # type: ignore[dict-item]


# -- the cascade window's failures, kept as a flag ---------------------------------------------


@hypothesis_settings(max_examples=100, deadline=None)
@given(STEPS)
def test_the_window_s_failure_flag_is_whether_the_window_holds_a_failure(
    steps: list[tuple[Any, ...]],
) -> None:
    """After every event the flag says what a scan of the cascade window would say."""
    detectors = StreamDetectors(SupervisionSettings())
    for event in _story(steps):
        detectors.observe(event)
        assert detectors._failing == any(item[1] is not None for item in detectors._results)


# -- the volatile-id hint -----------------------------------------------------------------------

HINT = re.compile(r"[0-9a-fA-F]{4}(?:[0-9a-fA-F]{4}|-)")


@given(st.text(alphabet=st.sampled_from('0123456789abcdefABCDEFgGxX-_ :/"{}'), max_size=40))
@example("deadbeef")
@example("dead-")
@example("deadbee")
@example("xdeadbeefx")
def test_the_hex_shape_finds_what_the_hint_pattern_finds(text: str) -> None:
    """Hex digits written `x`, dashes kept: 8 x's or 4 x's and a dash are in the shape exactly
    when the hint pattern matches the text."""
    shape = text.encode("ascii").translate(signals._HEX_SHAPE)
    assert (b"xxxxxxxx" in shape or b"xxxx-" in shape) == (HINT.search(text) is not None)


def test_the_hex_shape_maps_hex_digits_dashes_and_nothing_else() -> None:
    """Every byte: a hex digit to `x`, a dash to itself, anything else to a space."""
    for byte in range(256):
        char = chr(byte)
        expected = "x" if char in "0123456789abcdefABCDEF" else "-" if char == "-" else " "
        assert chr(signals._HEX_SHAPE[byte]) == expected


def test_json_of_the_bench_shapes_is_unchanged() -> None:
    """A smoke check of canonical_args on the shapes the bench's calls have."""
    volatile = frozenset(SupervisionSettings().volatile_keys)
    assert canonical_args({"command": "make test", "description": "7"}, volatile) == (
        json.dumps({"command": "make test"}, separators=(",", ":"))
    )
    assert canonical_args({"x": 3}, volatile) == '{"x":3}'
