"""The detectors' common ground: the counters every report reads, the turns (and the stall,
turns in a row without progress), each sighted episode kept and updated while it lasts, and
what the settings say of a tool, asked once.

`StreamDetectors` (detectors.py) joins this with the families of detectors: the agent's
messages and the CLI's errors (detect_messages.py), the context (detect_context.py), the
patterns of results (detect_patterns.py) and the calls with their results (detectors.py).
"""

from __future__ import annotations

from typing import Any

from worker.models import AgentEvent
from worker.supervision.anomaly import URGENT, WARN, Evidence, Sighting
from worker.supervision.settings import SupervisionSettings, Threshold

# Kinds whose urgent level cuts the agent short: urgent only after this many agent turns in a
# row without progress (no new result, no file change). Ours: the strongest evidence is a
# pattern that goes on while nothing is learned; one that teaches the agent something along
# the way (a message repeated between new findings) stays a nudge.
_QUIET_FOR_URGENT = 2
_GATED = frozenset({"loop", "repeated_error", "repeated_message", "oscillation"})

# A call's target, whether its arguments hold prose, whether it waits, and its arguments.
Where = tuple[str, bool, bool, dict[str, Any] | None]


class DetectorBase:
    """The counters, the turns and the sightings every family of detectors shares."""

    def __init__(self, settings: SupervisionSettings, model: str | None = None) -> None:
        self.s = settings
        self.model = model  # the model the stream names (the mode's model until it does)
        self.model_hint = model  # the mode's model, which may carry a window marker
        self.session_model: str | None = None
        self.seq = -1  # position of the last event in the task's event sequence
        self.turn = 0  # agent turns: an assistant message after tool results (or the start)
        self.tool_calls = 0
        self.tool_failures = 0
        self.errors = 0  # error events of the CLI and lines that are not JSON
        self.progress = 0  # successful file changes: progress_tools, or a shell that writes
        self.context_tokens: int | None = None
        self.context_window: int | None = None
        self.context_fill: float | None = None
        self.peak_context_fill: float | None = None
        self._volatile = frozenset(settings.volatile_keys)
        self._thresholds: dict[tuple[str, str | None], Threshold | None] = {}
        # tool -> (exempt, loop threshold, repeated-error threshold), asked of settings once
        self._tools: dict[str, tuple[bool, Threshold | None, Threshold | None]] = {}
        self._in_turn = False
        # Read for every turn, as a plain attribute (a pydantic model's attribute is three
        # times slower to read).
        self._stall_turns = settings.stall_turns
        self._live: dict[str, Sighting] = {}  # kind -> the episode of it last sighted
        self._since_progress = 0
        self._stall_start = (0, 0)

    def _new_turn(self, event: AgentEvent, found: list[Sighting]) -> None:
        """An assistant event (text, a call, usage) after tool results, or the first."""
        self._in_turn = True
        self.turn += 1
        self._since_progress += 1
        if self._since_progress == 1:
            self._stall_start = (self.seq, event.index)
        if self._since_progress < self._stall_turns:
            return
        turns = self._since_progress
        found.append(
            self._sighting("stall", WARN, "turns", self._stall_start, turns, {"turns": turns})
        )

    def _on_nothing(self, event: AgentEvent, found: list[Sighting]) -> None:
        """A kind no detector looks at (a rate-limit notice)."""

    def _sighting(
        self,
        kind: str,
        level: str,
        key: str,
        since: tuple[int, int],
        count: int,
        evidence: Evidence,
    ) -> Sighting:
        """A pattern sighted at the current event; `since` is (seq, line) of its first event.
        The same episode (kind, key and start) is the same Sighting, updated."""
        if level != WARN and kind in _GATED and self._since_progress < _QUIET_FOR_URGENT:
            level = WARN  # something was learned just now: not the strongest evidence
        live = self._live.get(kind)
        if live is None or live.start != since[0] or live.key != key:
            live = self._live[kind] = Sighting(
                kind, level, key, since[0], self.seq, count, since[1], evidence
            )
        else:
            live.level, live.at, live.count, live.evidence = level, self.seq, count, evidence
        return live

    def _threshold(self, kind: str, tool: str) -> Threshold | None:
        key = (kind, tool)
        if key not in self._thresholds:
            self._thresholds[key] = self.s.threshold(kind, tool)
        return self._thresholds[key]

    def _tool(self, tool: str) -> tuple[bool, Threshold | None, Threshold | None]:
        """What the settings say of a tool: exempt, its loop and repeated-error thresholds."""
        info = (
            self.s.is_exempt(tool),
            self._threshold("loop", tool),
            self._threshold("repeated_error", tool),
        )
        self._tools[tool] = info
        return info

    @staticmethod
    def _tool_of(key: str | None) -> str:
        return (key or "unknown").split(" ", 1)[0]


def threshold_level(count: int, limit: Threshold) -> str:
    """The level a count of `limit`'s kind reaches: urgent from its urgent count, else warn."""
    return URGENT if limit.urgent is not None and count >= limit.urgent else WARN
