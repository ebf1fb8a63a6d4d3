"""Supervision quality over a labelled corpus of real transcripts: recall, timing, false alarms.

The corpus is a folder with an `index.json`: one entry per transcript with its `label`
(`stuck` or `healthy`), its `split` (`tune`: the transcripts the thresholds were chosen on;
`holdout`: transcripts set aside before any detector ran on them, never used to tune), and
for a stuck one `stuck_at`, the position (`AgentEvent.index`: the 0-based line of a
JSON-lines file, the step of a SWE-agent `.traj`, the message of a mini-swe-agent
`.traj.json`) of the first event where a careful reader calls it stuck.

An *alarm* is the first urgent finding of a kind that stops the agent (a loop, a repeated
error, a repeated message, an oscillation, a CLI error that keeps coming back) or the PACE
ladder reaching emergency: the point where a live run would have been cut short. Time is
counted in *turns*: agent turns, plus sessions (a CLI that fails before the model ever
answers has sessions but no agent turns; each session counts as one). A stuck run is caught
*on time* when the alarm comes within the first third of the turns it wasted (from
`stuck_at` to its end); a healthy run with an alarm is a false alarm. Stopping at the alarm
saves the turns after it, and the transcript's cost in proportion when its cost is known.

A stuck run is *flagged on time* when a finding of any level (a nudge will do) comes at most
`FLAG_WITHIN` events after `stuck_at`, events counted as the positions of the transcript (its
lines, steps or messages); issue 41's acceptance line is 90 % of stuck runs flagged on time,
with no urgent and at most one warning false alarm per 40 healthy runs.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from worker.errors import MalformedInput
from worker.models import EventKind
from worker.supervision.anomaly import URGENT, WARN
from worker.supervision.formats import read_text
from worker.supervision.settings import SupervisionSettings
from worker.supervision.watch import STOP_KINDS, Watch

LABELS = ("stuck", "healthy")
FLAG_WITHIN = 3
SPLITS = ("tune", "holdout")


@dataclass
class Scored:
    """One transcript's judgement."""

    file: str
    label: str
    split: str
    turns: int
    alarm_turn: int | None  # turn of the first alarm, None when there was none
    alarm: str | None  # "kind level" of that alarm
    stuck_turn: int | None = None
    stuck_kind: str | None = None  # the label's kind of anomaly, for a stuck run
    on_time: bool = False
    saved_turns: int = 0
    saved_usd: float = 0.0
    warnings: list[str] = field(default_factory=list)  # nudges (warn level) seen
    flag_delay: int | None = None  # positions from `stuck_at` to the first finding after it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_index(folder: Path) -> list[dict[str, Any]]:
    """The corpus index, checked: every entry names a file that exists and a known label."""
    path = folder / "index.json"
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise MalformedInput(f"cannot read the corpus index {path}: {exc}") from exc
    for entry in entries:
        if entry.get("label") not in LABELS:
            raise MalformedInput(f"{entry.get('file')}: label must be one of {LABELS}")
        if entry.get("split") not in SPLITS:
            raise MalformedInput(f"{entry.get('file')}: split must be one of {SPLITS}")
        if entry["label"] == "stuck" and not isinstance(entry.get("stuck_at"), int):
            raise MalformedInput(f"{entry['file']}: a stuck transcript needs `stuck_at`")
        if not (folder / entry["file"]).is_file():
            raise MalformedInput(f"{entry['file']} is in the index but not in {folder}")
    return list(entries)


def score(
    folder: Path, entry: dict[str, Any], settings: SupervisionSettings | None = None
) -> Scored:
    """Replay one transcript of the corpus and judge the supervisor's first alarm."""
    settings = settings or SupervisionSettings()
    text = (folder / entry["file"]).read_text(encoding="utf-8", errors="replace")
    _, events = read_text(text, entry.get("format", "auto"))
    watch = Watch(settings)
    turns, agent_turn = 0, 0
    stuck_at = entry.get("stuck_at")
    stuck_turn: int | None = None
    alarm: tuple[int, str] | None = None
    warnings: list[str] = []
    positions: set[int] = set()  # the positions from `stuck_at` on, until the first finding
    flag_delay: int | None = None
    for event in events:
        found = watch.observe(event)
        if event.kind is EventKind.SESSION or watch.detectors.turn != agent_turn:
            turns += 1
            agent_turn = watch.detectors.turn
        if stuck_at is not None and stuck_turn is None and event.index >= stuck_at:
            stuck_turn = turns
        if stuck_turn is not None and flag_delay is None:
            positions.add(event.index)
            if found:
                flag_delay = len(positions) - 1
        for anomaly in found:
            if anomaly.level == WARN and anomaly.kind not in warnings:
                warnings.append(anomaly.kind)
            if alarm is None and _stops(anomaly.kind, anomaly.level):
                alarm = (turns, f"{anomaly.kind} {anomaly.level}")
        if alarm is None and found and watch.pace() == "emergency":
            alarm = (turns, "pace emergency")
    result = Scored(
        file=entry["file"],
        label=entry["label"],
        split=entry["split"],
        turns=turns,
        alarm_turn=alarm[0] if alarm else None,
        alarm=alarm[1] if alarm else None,
        stuck_turn=stuck_turn,
        stuck_kind=entry.get("stuck_kind"),
        warnings=warnings,
        flag_delay=flag_delay,
    )
    if alarm is not None:
        result.saved_turns = turns - alarm[0]
        cost = entry.get("cost_usd")
        if isinstance(cost, int | float) and turns:
            result.saved_usd = round(cost * result.saved_turns / turns, 4)
    if entry["label"] == "stuck" and alarm is not None and stuck_turn is not None:
        wasted = turns - stuck_turn + 1
        result.on_time = alarm[0] >= stuck_turn and alarm[0] - stuck_turn <= wasted / 3
    return result


def _stops(kind: str, level: str) -> bool:
    return level != WARN and (kind in STOP_KINDS or level != URGENT)


def summary(results: list[Scored]) -> dict[str, Any]:
    """Recall, on-time recall, false alarms and savings over scored transcripts."""
    stuck = [r for r in results if r.label == "stuck"]
    healthy = [r for r in results if r.label == "healthy"]
    caught = [r for r in stuck if r.alarm_turn is not None]
    on_time = [r for r in stuck if r.on_time]
    false_alarms = [r for r in healthy if r.alarm_turn is not None]
    flagged = [r for r in stuck if r.flag_delay is not None and r.flag_delay <= FLAG_WITHIN]
    nudged = sum(1 for r in healthy if r.warnings)
    return {
        "transcripts": len(results),
        "stuck": len(stuck),
        "healthy": len(healthy),
        "recall": _ratio(len(caught), len(stuck)),
        "recall_on_time": _ratio(len(on_time), len(stuck)),
        "false_alarms": len(false_alarms),
        "false_alarm_files": [r.file for r in false_alarms],
        "healthy_with_nudges": nudged,
        "nudges_per_40_healthy": round(nudged * 40 / len(healthy), 2) if healthy else None,
        "flagged_on_time": _ratio(len(flagged), len(stuck)),
        "flag_delays": {r.file: r.flag_delay for r in stuck},
        "missed": [r.file for r in stuck if not r.on_time],
        "saved_turns": sum(r.saved_turns for r in caught),
        "wasted_turns": sum(r.turns - (r.stuck_turn or r.turns) + 1 for r in stuck),
        "saved_usd": round(sum(r.saved_usd for r in caught), 4),
        "by_kind": by_kind(stuck),
    }


def by_kind(stuck: list[Scored]) -> dict[str, dict[str, Any]]:
    """For each labelled kind of stuck run: how many, how many caught on time, and by which
    alarms (a kind caught only by another detector's alarm shows here)."""
    kinds: dict[str, dict[str, Any]] = {}
    for r in stuck:
        row = kinds.setdefault(r.stuck_kind or "unknown", {"stuck": 0, "on_time": 0, "alarms": {}})
        row["stuck"] += 1
        row["on_time"] += r.on_time
        if r.alarm is not None:
            row["alarms"][r.alarm] = row["alarms"].get(r.alarm, 0) + 1
    return kinds


def by_split(results: list[Scored]) -> dict[str, dict[str, Any]]:
    """The summary of each split, tune and holdout, apart: a held-out figure never mixes in
    the transcripts the thresholds were chosen on."""
    return {name: summary([r for r in results if r.split == name]) for name in SPLITS}


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None
