"""`worker inspect`: replay a recorded transcript through the supervisor's own detectors.

The replay drives the same `Watch` as a live run. Each anomaly is reported once per episode
and level (where its pattern starts, where it was detected, how far it grew) with the
steering the supervisor would have given, marked `suppressed` when the per-type cooldown
would have held it back. The cooldown's clock is the agent turn here: a transcript is one
iteration seen from inside. The first radio check that would have cut the agent short is
reported as `stop`.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worker.errors import MalformedInput, UsageError
from worker.supervision.anomaly import Anomaly, Sighting
from worker.supervision.formats import FORMATS, UnreadableTranscript, read_file
from worker.supervision.ladder import pace_rank
from worker.supervision.settings import SupervisionSettings
from worker.supervision.watch import Steering, Watch

# What a reader meets in a field of another type than its format's: a dict where a string
# was expected (OpenHands V1's `observation`), a list where an object was.
_SHAPE_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError)


@dataclass
class Finding:
    kind: str
    level: str
    start_event: int  # where the pattern starts (position among the normalised events)
    start_line: int  # the transcript line of that event, from 1 (for `sed -n 12p`)
    detected_event: int  # where the supervisor would have seen it
    count: int  # streak length / distinct tools / percent of context, when detected
    peak: int  # how far it grew afterwards
    steering: str
    suppressed: bool  # the cooldown of its kind would have held the message back
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class Stop:
    event: int
    line: int
    reason: str


@dataclass
class InspectReport:
    path: str
    format: str
    events: int = 0
    turns: int = 0
    tool_calls: int = 0
    tool_failures: int = 0
    errors: int = 0  # error events of the CLI and lines that are not JSON
    model: str | None = None
    peak_context_fill: float | None = None
    pace: str = "primary"
    stop: Stop | None = None
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """`dataclasses.asdict(self)`, built field by field: asdict deep-copies every value
        through copy.deepcopy, more time than the JSON rendering of a report of 1,000
        findings. The values are JSON data (strings, numbers, lists and dicts of them)."""
        data = dict(vars(self))
        data["stop"] = None if self.stop is None else dict(vars(self.stop))
        data["findings"] = [
            {**vars(finding), "evidence": _copied(finding.evidence)} for finding in self.findings
        ]
        return data


def inspect_transcript(
    path: Path, settings: SupervisionSettings, fmt: str = "auto"
) -> InspectReport:
    """Replay `path`; raises UsageError when it is missing, MalformedInput when unreadable."""
    if fmt != "auto" and fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; use auto or one of {', '.join(FORMATS)}")
    if not path.is_file():
        raise UsageError(f"transcript {path} not found (give the path of a .jsonl or .json file)")
    try:  # the file is read as the replay goes (read_file)
        with path.open(encoding="utf-8", errors="replace") as file, _collector_paused():
            found_fmt, events = read_file(file, fmt)
            return replay(events, settings, str(path), found_fmt)
    except OSError as exc:
        raise MalformedInput(f"cannot read transcript {path}: {exc}") from exc
    except UnreadableTranscript as exc:
        raise UnreadableTranscript(f"{path}: {exc}") from exc
    except _SHAPE_ERRORS as exc:
        # A shape no reader foresaw (a field of another type than its format's): exit 65
        # naming the file, never a traceback.
        raise UnreadableTranscript(
            f"{path}: not a transcript worker can read: an event of an unexpected shape "
            f"({type(exc).__name__}: {str(exc)[:200]})"
        ) from exc


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector run rarely during a replay, as before after it.

    A replay builds and frees a dozen objects per event and keeps few, none of them in cycles
    (reference counting frees them), yet at the default thresholds the collector runs every
    700 allocations and walks the survivors each time: 2-7% of the time of `inspect` over
    100,000 events, more when it walks every object of the process. mypy's build.py raises
    the thresholds to these for the same reason.
    """
    thresholds = gc.get_threshold()
    gc.set_threshold(200_000, 30, 30)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def replay(
    events: Any, settings: SupervisionSettings, path: str = "-", fmt: str = "claude"
) -> InspectReport:
    """The supervisor's judgement over an event sequence, as a report. Linear in events."""
    report = InspectReport(path=path, format=fmt)
    watch = Watch(settings)
    seen: dict[tuple[Any, ...], Finding] = {}
    known: dict[Sighting, Finding] = {}  # a pattern's finding, at the level it was last seen
    pace_seen = 0
    episodes = 0  # the PACE level only moves when a new episode begins
    since_check = 0
    # Names bound once: this loop runs for every event. The detectors count what the report
    # needs (calls, errors, the context's peak) as they go.
    detectors, radio_every = watch.detectors, settings.radio_check_events
    sight, note = detectors.sight, watch.note
    for event in events:
        found = sight(event)
        if found:
            for live in found:
                # Most sightings are of a finding already made, at its level: only its peak
                # can grow, and no Anomaly is built. Nothing else here reads a repeat: the
                # episode is counted, and the radio check stops at the first urgent sighting
                # of a loop-like kind (a new finding) or never takes urgent ones.
                finding = known.get(live)
                if finding is not None and finding.level == live.level:
                    if live.count > finding.peak:
                        finding.peak = live.count
                    continue
                anomaly = live.anomaly()
                note(anomaly)
                finding = seen.get((anomaly.kind, anomaly.key, anomaly.start, anomaly.level))
                if finding is None:
                    finding = _record(anomaly, watch, seen, report)
                elif anomaly.count > finding.peak:
                    finding.peak = anomaly.count
                known[live] = finding
            # No drain: nothing here reads the sightings pending for the next prompt.
            sighted = len(watch.episodes)
            rank = pace_rank(watch.pace()) if sighted != episodes else pace_seen
            episodes = sighted
            if rank > pace_seen:
                pace_seen = rank
                steering = watch.steer_pace(watch.detectors.turn)
                if steering is not None:
                    report.findings.append(_pace_finding(steering, watch, event.index))
        since_check += 1
        if since_check >= radio_every:
            since_check = 0
            reason = watch.radio_check() if report.stop is None else None
            if reason is not None:
                report.stop = Stop(detectors.seq, event.index + 1, reason)
    report.events, report.tool_calls = detectors.seq + 1, detectors.tool_calls
    report.errors = detectors.errors
    report.turns = detectors.turn
    report.tool_failures = detectors.tool_failures
    report.model = detectors.model
    peak_fill = detectors.peak_context_fill
    report.peak_context_fill = round(peak_fill, 4) if peak_fill is not None else None
    report.pace = watch.pace()
    return report


def _record(
    anomaly: Anomaly, watch: Watch, seen: dict[tuple[Any, ...], Finding], report: InspectReport
) -> Finding:
    """A new finding: the first sighting of an episode at its level."""
    steering = watch.steer([anomaly], watch.detectors.turn)[0]
    finding = Finding(
        kind=anomaly.kind,
        level=anomaly.level,
        start_event=anomaly.start,
        start_line=anomaly.start_line + 1,
        detected_event=anomaly.at,
        count=anomaly.count,
        peak=anomaly.count,
        steering=steering.text,
        suppressed=steering.suppressed,
        evidence=_plain(anomaly.evidence),
    )
    seen[(anomaly.kind, anomaly.key, anomaly.start, anomaly.level)] = finding  # episode, level
    report.findings.append(finding)
    return finding


def _pace_finding(steering: Steering, watch: Watch, line: int) -> Finding:
    seq = watch.detectors.seq
    return Finding(
        kind="pace",
        level=steering.level,
        start_event=seq,
        start_line=line + 1,
        detected_event=seq,
        count=watch.anomaly_count,
        peak=watch.anomaly_count,
        steering=steering.text,
        suppressed=steering.suppressed,
        evidence={"pace": watch.pace(), "anomalies": watch.anomaly_count},
    )


def _copied(value: Any) -> Any:
    """A copy of JSON data: its lists and dicts copied, all the way down."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    return value


def _plain(evidence: dict[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in evidence.items()}
