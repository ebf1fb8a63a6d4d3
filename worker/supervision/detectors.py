"""Incremental anomaly detectors over one task's normalised agent events.

`StreamDetectors.observe(event)` updates a handful of counters and returns the anomalies the
event completes. Here: the dispatch by event kind, and the calls with their results (how a
call is described, the loop); the families it joins are in detect_base.py (the counters, the
turns and their stall, the sightings), detect_messages.py, detect_context.py and
detect_patterns.py. Each step is O(1) (the cascade window is a fixed-size deque), so a replay of
100,000 events stays linear. The thresholds are in settings.py, each cited to its source.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from worker.models import AgentEvent, EventKind
from worker.supervision.anomaly import Anomaly, Sighting
from worker.supervision.detect_base import Where, threshold_level
from worker.supervision.detect_context import ContextDetector
from worker.supervision.detect_messages import MessageDetectors
from worker.supervision.detect_patterns import PatternDetectors
from worker.supervision.failtext import text_failure
from worker.supervision.progress import SHELL_KEYS, Knowledge, shell_writes
from worker.supervision.settings import SupervisionSettings, Threshold
from worker.supervision.signals import (
    SIBLING_ERRORED,
    TARGET_KEYS,
    answer_signature,
    blur_digits,
    call_target,
    canonical_mixed,
    canonical_strings,
    echoed_values,
    error_head,
    error_signature,
    failure_class,
    short,
    waits,
)
from worker.supervision.streaks import Streak

# Event kinds read once: on Python 3.11 `EventKind.X` costs ten global reads (EnumType has
# a __getattr__), and this runs for every event.
_TOOL_CALL, _TOOL_RESULT, _TEXT, _USAGE = (
    EventKind.TOOL_CALL,
    EventKind.TOOL_RESULT,
    EventKind.TEXT,
    EventKind.USAGE,
)
_SESSION, _ERROR, _RESULT, _OTHER = (
    EventKind.SESSION,
    EventKind.ERROR,
    EventKind.RESULT,
    EventKind.OTHER,
)
# Calls described at once (see _on_call), cleared when full: a few MB at the most.
_DESCRIBED = 1024
_UNKNOWN_CALL = ("unknown", "{}", "unknown {}", False, ("", False, False, None))
# A call as the detectors see it: tool, canonical arguments, "tool args", whether it writes
# files, and (its target, whether its arguments hold prose, whether it waits, its
# arguments).
Described = tuple[str, str, str, bool, Where]


class StreamDetectors(PatternDetectors, ContextDetector, MessageDetectors):
    """Loop, repeated error, repeated message, oscillation, cascade, context and turn stall."""

    def __init__(self, settings: SupervisionSettings, model: str | None = None) -> None:
        super().__init__(settings, model)
        # The keys a call's description never reads: canonical arguments leave volatile keys
        # out, and shell_writes reads shell keys only (see _on_call).
        self._unread = self._volatile - SHELL_KEYS
        self._volatile_read = self._volatile & TARGET_KEYS  # usually none
        self._progress_tools = frozenset(settings.progress_tools)
        # tool_id -> ((tool, canonical args, "tool args", writes files), seq, line) of the call
        self._calls: dict[str, tuple[Described, int, int]] = {}
        # (tool, argument items) -> (tool, canonical args, "tool args", writes files)
        self._described: dict[tuple[str, tuple[Any, ...]], Described] = {}
        self._known = Knowledge()
        self._call = Streak()
        self._ok_turn = -1  # the last turn in which a call succeeded
        # One dict lookup per event instead of a chain of comparisons; every kind is there.
        self._on_kind = dict.fromkeys(EventKind, self._on_nothing) | {
            _TOOL_CALL: self._on_call,
            _TOOL_RESULT: self._on_result,
            _TEXT: self._on_text,
            _USAGE: self._on_usage,
            _SESSION: self._on_session,
            _ERROR: self._on_error,
            _RESULT: self._on_end,
            _OTHER: self._on_other,
        }

    def observe(self, event: AgentEvent) -> list[Anomaly]:
        """Feed one event; return the anomalies it completes (often none)."""
        found = self.sight(event)
        return [live.anomaly() for live in found] if found else []

    def sight(self, event: AgentEvent) -> list[Sighting]:
        """Feed one event; return the patterns it sights, each updated in place while it
        lasts (`observe` for their Anomaly records)."""
        self.seq += 1
        found: list[Sighting] = []
        self._on_kind[event.kind](event, found)
        return found

    def _on_call(self, event: AgentEvent, found: list[Sighting]) -> None:
        if not self._in_turn:
            self._new_turn(event, found)
        self.tool_calls += 1
        tool, args = event.tool or "unknown", event.args
        # A call made before (a loop, a file read again) is described once: looked up by its
        # tool and argument items, one dict lookup instead of canonical_args and shell_writes.
        # The keys a description never reads are left out, so that a loop which rewords its
        # Bash `description` each time is still the same call.
        try:
            if not args or self._unread.isdisjoint(args):
                seen = (tool, tuple(args.items()) if args else ())
            else:
                seen = (tool, tuple([i for i in args.items() if i[0] not in self._unread]))
            described = self._described.get(seen)
        except TypeError:  # a list or an object among the arguments: described every time
            seen, described = None, None
        if described is None:
            described = self._describe(tool, args, seen)
        if event.tool_id:
            self._calls[event.tool_id] = (described, self.seq, event.index)

    def _describe(
        self, tool: str, args: dict[str, Any] | None, seen: tuple[str, tuple[Any, ...]] | None
    ) -> Described:
        """A call's tool, canonical arguments, key ("tool args", what the knowledge and the
        alternation compare) and whether it writes files; kept for calls of short strings
        (equal strings are equal arguments; not so numbers, where 1 == 1.0 == True)."""
        canonical = canonical_strings(args, self._volatile) if args else "{}"
        kept = seen if canonical is not None else None
        if canonical is None:  # not all short strings (so there are arguments)
            canonical = canonical_mixed(args or {}, self._volatile)
        writes = tool in self._progress_tools or shell_writes(args)
        # Neither reads a volatile key unless the settings made one of theirs volatile: the
        # first call of a memoised description stands for the others. The arguments are kept
        # for an error that may quote them back (_echoed), read only when the call fails.
        plain = args
        if args and self._volatile_read and not self._volatile_read.isdisjoint(args):
            plain = _without(args, self._volatile)
        target, prose = call_target(plain)
        where = (target, prose, waits(plain), args)
        described = (tool, canonical, f"{tool} {canonical}", writes, where)
        if kept is not None:
            if len(self._described) >= _DESCRIBED:
                self._described.clear()
            self._described[kept] = described
        return described

    def _loop(self, tool: str, args: str, count: int, limit: Threshold) -> Sighting:
        """The loop sighted when the same call got the same answer `count` times in a row."""
        return self._sighting(
            "loop",
            threshold_level(count, limit),
            f"{tool} {args}",
            (self._call.start, self._call.line),
            count,
            partial(_loop_evidence, tool, args),
        )

    def _on_result(self, event: AgentEvent, found: list[Sighting]) -> None:
        self._in_turn = False
        # A pattern of results starts at the call of its first result.
        call = self._calls.pop(event.tool_id or "", None) or (_UNKNOWN_CALL, self.seq, event.index)
        (tool, args, key, writes, where), seq, line = call
        self._cli.worked()
        exempt, loop_limit, error_limit = self._tools.get(tool) or self._tool(tool)
        if exempt:
            return
        # A result without an error flag that reports a failure in a tool's well-known words
        # (an edit that did not apply, a `cd` that failed before a `;`) failed all the same,
        # and its message is its signature.
        failed, told = event.is_error, None
        if not failed and event.text:
            told = text_failure(event.text)
            failed = told is not None
        if failed:
            error = event.error or event.text
            if error and SIBLING_ERRORED in error[:200]:
                return  # cancelled with its batch: it never ran (the batch counts once)
            cls = failure_class(error)
            self.tool_failures += 1
            if told is not None:
                sig = error_signature(told)
            else:
                sig = error_signature(error, self._echoed(where)) if error else ""
            self._repeated_error(tool, args, error, sig, cls, error_limit, where, seq, line, found)
            self._edit(tool, where[3], told or error_head(error), seq, line, found)
            answer = "<error>"
            outcome: str | bytes = "!" + (sig or "<no text>")
        else:
            cls = None
            self._edits.result(tool, where[3], False, "", seq, line)
            if self._fail.key is not None:  # a call that works ends the streak (another
                self._fail.reset()  # way, or past it); once, rather than after every success
            self._ok_turn = self.turn
            answer = answer_signature(event.text)
            # A reply to prose (a person's answer) is worded anew each time.
            outcome = "" if where[1] else blur_digits(answer[:300])
            # A success: progress when it writes or teaches something new.
            if writes:
                self.progress += 1
            if self._known.learn(key, answer) or writes:
                self._since_progress = 0
                self._reject.reset()
            # A cascade forgets the failures before a success: the agent got going again.
            if self._failing:
                self._failing = False
                self._results.clear()
                self._cascade.clear()
        # An identical call is a loop only when its result is identical too, or an error
        # (OpenHands compares action and observation): polling a CI run until its state
        # changes is progress.
        count = self._call.push((tool, args, answer), seq, line)
        if loop_limit is not None and count >= loop_limit.warn:
            found.append(self._loop(tool, args, count, loop_limit))
        self._oscillation(tool, key, failed and not where[2], seq, line, found, where[2])
        # Cycles: the same few steps (tool, target, result with numbers blurred) coming round.
        # A file change starts afresh (edit, run, edit, run is work), and so does a wait (a
        # cycle around a `sleep` is polling).
        if (writes and not failed) or where[2]:
            self._cycles_of.reset()
        else:
            step = where[0] if where[1] else args  # the call itself, its prose left out
            rounds, cycle = self._cycles_of.push(
                (tool, where[0], outcome), (tool, step, outcome if failed else ""), seq, line
            )
            if rounds:
                self._cycle(tool, where[0], rounds, cycle, found)
        # A failure in a turn where another call already worked is one the agent has a way
        # around (a parallel batch that also tried another tool): no cascade of its own.
        if failed and self._ok_turn != self.turn:
            self._results.append((tool, cls, seq, line, self.turn))
            self._failing = True
            self._cascades(found)

    def _echoed(self, where: Where) -> tuple[str, ...]:
        """The strings of a failed call's arguments that its error may quote back."""
        args = where[3]
        if args and not self._volatile.isdisjoint(args):
            args = _without(args, self._volatile)
        return echoed_values(args)


# The evidence of a loop: built when the sighting's Anomaly is asked for (a repeat sighting's
# is rarely read), from the values of its time.


def _without(args: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    return {key: value for key, value in args.items() if key not in keys}


def _loop_evidence(tool: str, args: str) -> dict[str, Any]:
    return {"tool": tool, "args": short(args, 120)}
