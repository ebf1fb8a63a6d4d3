"""Steering: the `[SUPERVISOR]` line for an anomaly, and the per-type cooldown.

A message names the anomaly and its evidence in one sentence, then gives one action
(at most three sentences: the spec asks for minimal tokens with maximum signal, and SWE-PRM
found that naming the failure type helps more than prescribing). Evidence is quoted in
backticks with backticks removed from it, so it can never pass for prose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from worker.supervision.anomaly import EMERGENCY, SEVERITY, URGENT, Anomaly
from worker.supervision.settings import SupervisionSettings
from worker.supervision.signals import short

PREFIX = "[SUPERVISOR]"

ACTIONS = {
    "stall": "Reassess your approach: try a different method, simplify the task, or report "
    "what blocks you with STATUS failure.",
    "loop": "Repeating it will not give a different result; change your approach.",
    "repeated_error": "Stop retrying; find the cause of that error first, or take another way.",
    "edit_failure": "Stop editing that file piece by piece: read it again as it is now, then "
    "make one edit that matches it, or rewrite the file whole.",
    "repeated_message": "Step back and do something different from your last turns.",
    "oscillation": "Neither approach is converging; find out why one fails before switching "
    "again, or try a third way.",
    "cycle": "Going round the same steps again will not change the outcome; find out why "
    "the step that fails fails, or take another way.",
    "cascade": "Stop and verify your assumptions: working directory, file paths and environment.",
    "permission": "Those tools are not allowed in this run; work without them, or ask for "
    "them with STATUS wait.",
    "infrastructure": "The environment is failing, not your code; do not retry in a loop, and "
    "report it with STATUS failure if it persists.",
    "cli_error": "The agent CLI itself is failing, not the task; fix the CLI's setup (key, "
    "plan, network) before running it again.",
    "context": "Wrap up the current step, summarise what matters, and avoid reading large files.",
    "context_urgent": "Finish the immediate step now and report your state in the STATUS block.",
}

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def evidence(anomaly: Anomaly) -> str:
    """The first sentence: the anomaly's name and what shows it."""
    ev = anomaly.evidence
    n = anomaly.count
    kind = anomaly.kind
    if kind == "stall":
        if "iterations" in ev:
            reason = f" (last STATUS: `{short(ev.get('reason'), 80)}`)" if ev.get("reason") else ""
            return f"Stall: {n} iterations in a row without changing any file{reason}."
        return f"Stall: {n} turns without progress (no new command, result or file change)."
    if kind == "loop":
        return f"Loop: you called {ev['tool']} `{ev['args']}` {n} times in a row."
    if kind == "repeated_error":
        return f"Repeated failure: {ev['tool']} failed {n} times with `{ev['error']}`."
    if kind == "edit_failure":
        return (
            f"Failing edits: {n} edits of `{ev['file']}` in a row did not apply "
            f"(last: `{ev['error']}`)."
        )
    if kind == "repeated_message":
        return f"Repetition: you wrote the same message {n} times (`{ev['text']}`)."
    if kind == "oscillation":
        both = " and both keep failing" if ev.get("failing") else ""
        tools = " and ".join(ev["tools"])
        return f"Oscillation: you alternate between {tools}{both} ({n} results in a row)."
    if kind == "cycle":
        return (
            f"Cycle: the same {ev['steps']} steps (ending with {ev['last']} "
            f"`{ev['target']}`) came round {n} times in a row."
        )
    if kind == "cascade":
        tools = ", ".join(ev["tools"])
        return f"Cascade: {n} different tools failed in the last {ev['window']} results ({tools})."
    if kind == "permission":
        return f"Permission denials: {', '.join(ev['tools'])} were refused."
    if kind == "infrastructure":
        return f"Infrastructure errors: {', '.join(ev['tools'])} failed on network or service."
    if kind == "cli_error":
        return f"CLI failure: the agent CLI failed {n} sessions in a row with `{ev['error']}`."
    if kind == "context":
        pct = round(ev["fill"] * 100)
        word = "nearly exhausted" if anomaly.level != "warn" else "filling up"
        return (
            f"Context {word}: {pct}% of the {ev['window']:,}-token window is used "
            f"({ev['tokens']:,} tokens)."
        )
    return f"{kind}: seen {n} times."


def message(anomaly: Anomaly, settings: SupervisionSettings) -> str:
    """The whole steering line for an anomaly (PACE lines come from `pace_message`)."""
    key = (
        "context_urgent"
        if anomaly.kind == "context" and anomaly.level != "warn"
        else (anomaly.kind)
    )
    action = settings.actions.get(anomaly.kind) or ACTIONS.get(key, "Change your approach.")
    return f"{PREFIX} {evidence(anomaly)} {_clip(action, 2)}"


def pace_message(level: str, why: str, settings: SupervisionSettings) -> str:
    guidance = settings.pace.guidance.get(level) or ""
    return f"{PREFIX} PACE {level}: {why}. {_clip(guidance, 2)}".rstrip()


@lru_cache(maxsize=64)  # a handful of configured texts, clipped for every message
def _clip(text: str, sentences: int) -> str:
    """At most `sentences` sentences of a configured text, so a message stays within three."""
    parts = _SENTENCE_END.split(text.strip())
    return " ".join(parts[:sentences])


@dataclass
class _Given:
    turn: int
    severity: int
    count: int


class Cooldowns:
    """Per anomaly type: no repeat within `turns` turns, unless the streak grew.

    A streak grows when its level rises (warn to urgent) or its count at least doubles since
    the last message; an emergency always passes (the supervisor-loop spec; OpenHands SDK).
    """

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self._given: dict[str, _Given] = {}

    def allows(self, kind: str, turn: int, level: str, count: int) -> bool:
        severity = SEVERITY.get(level, 0)
        last = self._given.get(kind)
        return (
            last is None
            or level == EMERGENCY
            or turn - last.turn >= self.turns
            or severity > last.severity
            or count >= 2 * last.count
        )

    def record(self, kind: str, turn: int, level: str, count: int) -> None:
        self._given[kind] = _Given(turn, SEVERITY.get(level, 0), count)

    def admit(self, kind: str, turn: int, level: str, count: int) -> bool:
        """`allows` and, when it does, `record`: the one call a caller usually wants."""
        if not self.allows(kind, turn, level, count):
            return False
        self.record(kind, turn, level, count)
        return True


def stop_reason(anomaly: Anomaly) -> str:
    """Why the agent was cut short: the loop kills the process group and keeps the work."""
    return f"supervisor emergency: {evidence(anomaly).rstrip('.')} (from event {anomaly.start})"


def is_urgent(anomaly: Anomaly) -> bool:
    return anomaly.level in (URGENT, EMERGENCY)
