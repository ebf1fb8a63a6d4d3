"""Incremental anomaly detectors over one task's normalised agent events.

`StreamDetectors.observe(event)` updates a handful of counters and returns the anomalies the
event completes. Each step is O(1) (the cascade window is a fixed-size deque), so a replay of
100,000 events stays linear. The thresholds are in settings.py, each cited to its source.
"""

from __future__ import annotations

from collections import deque
from functools import partial
from operator import itemgetter
from typing import Any

from worker.agents.claude_stream import SYNTHETIC_MODEL
from worker.models import AgentEvent, EventKind, InfraFailure
from worker.supervision.anomaly import URGENT, WARN, Anomaly, Evidence, Sighting
from worker.supervision.edits import EditStreaks
from worker.supervision.failtext import text_failure
from worker.supervision.progress import SHELL_KEYS, Knowledge, shell_writes
from worker.supervision.repeats import CliErrors, Rejections
from worker.supervision.settings import SupervisionSettings, Threshold
from worker.supervision.signals import (
    INFRASTRUCTURE,
    PERMISSION,
    SIBLING_ERRORED,
    TARGET_KEYS,
    TOOL,
    answer_signature,
    blur_digits,
    call_target,
    canonical_mixed,
    canonical_strings,
    distinct_failing,
    echoed_values,
    error_head,
    error_signature,
    failure_class,
    message_signature,
    short,
    waits,
)
from worker.supervision.streaks import Alternation, Cycle, Cycles, Streak

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
# The failure class of a failure in the cascade window (`map` runs in C, where a generator
# over the window costs a Python frame per item).
_FAILURE = itemgetter(1)
# Calls described at once (see _on_call), cleared when full: a few MB at the most.
_DESCRIBED = 1024
_UNKNOWN_CALL = ("unknown", "{}", "unknown {}", False, ("", False, False, None))
# A call as the detectors see it: tool, canonical arguments, "tool args", whether it writes
# files, and (its target, whether its arguments hold prose, whether it waits, its
# arguments).
Where = tuple[str, bool, bool, dict[str, Any] | None]
Described = tuple[str, str, str, bool, Where]
# What a model call adds to the context before the transcript shows its own rate (ours: a
# Claude Code turn with a tool result adds a few thousand tokens, a file read tens).
_TYPICAL_GROWTH = 10_000
# Kinds whose urgent level cuts the agent short: urgent only after this many agent turns in a
# row without progress (no new result, no file change). Ours: the strongest evidence is a
# pattern that goes on while nothing is learned; one that teaches the agent something along
# the way (a message repeated between new findings) stays a nudge.
_QUIET_FOR_URGENT = 2
_GATED = frozenset({"loop", "repeated_error", "repeated_message", "oscillation"})


class StreamDetectors:
    """Loop, repeated error, repeated message, oscillation, cascade, context and turn stall."""

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
        # The keys a call's description never reads: canonical arguments leave volatile keys
        # out, and shell_writes reads shell keys only (see _on_call).
        self._unread = self._volatile - SHELL_KEYS
        self._volatile_read = self._volatile & TARGET_KEYS  # usually none
        self._progress_tools = frozenset(settings.progress_tools)
        self._thresholds: dict[tuple[str, str | None], Threshold | None] = {}
        # tool -> (exempt, loop threshold, repeated-error threshold), asked of settings once
        self._tools: dict[str, tuple[bool, Threshold | None, Threshold | None]] = {}
        self._in_turn = False
        # tool_id -> ((tool, canonical args, "tool args", writes files), seq, line) of the call
        self._calls: dict[str, tuple[Described, int, int]] = {}
        # (tool, argument items) -> (tool, canonical args, "tool args", writes files)
        self._described: dict[tuple[str, tuple[Any, ...]], Described] = {}
        self._known = Knowledge()
        self._edits = EditStreaks()
        self._cli = CliErrors()
        self._reject = Rejections()
        self._call = Streak()
        self._fail = Streak()
        self._message = Streak()
        self._alt_calls = Alternation()
        self._alt_fail = Alternation()
        self._cycles_of = Cycles(settings.cycle_longest)
        self._fail_turn = -1  # the turn (parallel batch) of the failure last counted
        self._fail_targets: set[str | bytes] = set()  # what the streak's failures acted on
        self._fail_moved = 0  # failures of the streak that went somewhere new
        self._ok_turn = -1  # the last turn in which a call succeeded
        self._osc: tuple[int, int] | None = None  # (start, line) of the live oscillation
        # Settings read for every turn or usage event, as plain attributes (a pydantic model's
        # attribute is three times slower to read).
        self._stall_turns = settings.stall_turns
        self._context_warn, self._context_urgent = settings.context_warn, settings.context_urgent
        self._context_turns = (settings.context_warn_turns, settings.context_urgent_turns)
        self._context_last: int | None = None  # the tokens of the last usage
        self._context_growth: float | None = None  # tokens a turn adds, lately
        # The shortest runs that can be an oscillation: of any results, of failing ones.
        self._oscillating = (settings.thresholds["oscillation"].warn, settings.failing_alternation)
        # (tool, failure class, seq, line, turn) of the failures among the last results. A
        # success empties the window of failures, so the window of the last results is
        # successes, then the failures since the last one: only those are kept.
        self._results: deque[tuple[str, str | None, int, int, int]] = deque(
            maxlen=settings.cascade_window
        )
        self._cascade: dict[str, tuple[int, int]] = {}  # failure class -> (start, line)
        self._failing = False  # whether the window holds a failure
        self._cascade_distinct = settings.cascade_distinct
        self._live: dict[str, Sighting] = {}  # kind -> the episode of it last sighted
        self._context: tuple[int, int] | None = None
        self._since_progress = 0
        self._stall_start = (0, 0)
        self._window_names: tuple[str | None, ...] = ()
        self._window = settings.default_context_window
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

    # -- per kind -------------------------------------------------------------------------

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

    def _on_session(self, event: AgentEvent, found: list[Sighting]) -> None:
        self._cli.new_session()
        if event.model:
            self.model = self.session_model = event.model

    def _on_end(self, event: AgentEvent, found: list[Sighting]) -> None:
        if event.is_error:
            self._on_cli_error(event, found)

    def _on_other(self, event: AgentEvent, found: list[Sighting]) -> None:
        if event.raw_type == "user" and event.text:
            self._on_user_text(event, found)

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
            _level(count, limit),
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

    def _edit(
        self,
        tool: str,
        args: dict[str, Any] | None,
        message: str,
        seq: int,
        line: int,
        found: list[Sighting],
    ) -> None:
        """A failed result: when it is an edit, its file's streak of failed edits grows."""
        streak = self._edits.result(tool, args, True, message, seq, line)
        limit = self.s.thresholds["edit_failure"]
        if streak is None or streak[1] < limit.warn:
            return
        file, count, start, first, error = streak
        evidence = {"file": short(file, 120), "tool": tool, "error": error.rstrip(".")}
        found.append(
            self._sighting(
                "edit_failure", _level(count, limit), file, (start, first), count, evidence
            )
        )

    def _cycle(
        self, tool: str, target: str, rounds: int, cycle: Cycle, found: list[Sighting]
    ) -> None:
        """A cycle that came round `rounds` times: of steps whose results are alike, or (3
        steps or more) of the same calls (prose aside) and the same failure, the other results
        worded anew (a colleague's reply, a page's text)."""
        limit = self.s.thresholds["cycle"]
        level = _level(rounds, limit) if rounds >= limit.warn else None
        if cycle.fails():
            # The same failure after the same steps: a nudge once the sequence came round
            # twice, a stop when the agent sets off on it a third time.
            level = URGENT if cycle.matched > cycle.period else WARN
        if level is None:
            return
        evidence = {"steps": cycle.period, "last": tool, "target": short(target, 80)}
        found.append(
            self._sighting(
                "cycle", level, f"{cycle.period} steps", (cycle.start, cycle.line), rounds, evidence
            )
        )

    def _on_error(self, event: AgentEvent, found: list[Sighting]) -> None:
        self.errors += 1
        self._on_cli_error(event, found)

    def _on_cli_error(self, event: AgentEvent, found: list[Sighting]) -> None:
        text = event.error or event.text or event.subtype or ""
        limit = self.s.thresholds["cli_error"]
        anomaly = self._cli.observe(text, self.seq, event.index, limit)
        if anomaly is not None:
            found.append(Sighting.of(anomaly))

    def _on_user_text(self, event: AgentEvent, found: list[Sighting]) -> None:
        limit = self._threshold("repeated_error", "user")
        anomaly = self._reject.observe(
            event.text or "", self.seq, event.index, limit, self.s.min_message_chars
        )
        if anomaly is not None:
            found.append(Sighting.of(anomaly))

    @property
    def infra(self) -> InfraFailure | None:
        """A CLI error that came back in consecutive sessions until urgent, else None."""
        return self._cli.infra

    def _repeated_error(
        self,
        tool: str,
        args: str,
        error: str | None,
        own: str,
        cls: str | None,
        limit: Threshold | None,
        where: Where,
        seq: int,
        line: int,
        found: list[Sighting],
    ) -> None:
        """The same error again (`own`, its error_signature). Two errors are the same when
        their own words are (an error with none, only a wrapper or an exit code, is told
        apart by its call); a parallel batch counts once; and a failure on a target the
        streak has not touched yet (a path one level up, another input) is exploration, not
        a repeat."""
        # Numbers blurred: `/tmp/work-3/app.py` and `/tmp/work-4/app.py` are one place.
        target = blur_digits(where[0])
        sig = (tool, own or f"<no text> {args}")
        streak = self._fail
        if sig == streak.key and self._fail_turn == self.turn:
            return  # another call of the same batch, failing for the same reason
        self._fail_turn = self.turn
        if streak.push(sig, seq, line) == 1:
            self._fail_targets = {target}
            self._fail_moved = 0
            return
        if target not in self._fail_targets:
            self._fail_targets.add(target)
            self._fail_moved += 1
        count = streak.count - self._fail_moved
        if limit is not None and count >= limit.warn:
            found.append(
                self._sighting(
                    "repeated_error",
                    _level(count, limit),
                    f"{tool} {sig[1]}",
                    (streak.start, streak.line),
                    count,
                    partial(_error_evidence, tool, args, error, cls),
                )
            )

    def _oscillation(
        self,
        tool: str,
        key: str,
        failed: bool,
        seq: int,
        line: int,
        found: list[Sighting],
        waiting: bool = False,
    ) -> None:
        # Any results: A-B-A-B-A-B of identical calls (OpenHands 6). Failing results: tool A
        # fails, tool B fails, A fails, B fails (the spec; OpenHands warns at 4). A wait
        # (`sleep` between two checks of CI) is polling, not an oscillation.
        if waiting:
            self._alt_calls.reset()
        calls = self._alt_calls.push(key, seq, line)
        if failed:
            fails = self._alt_fail.push(tool, seq, line)
        else:
            if self._alt_fail.prev is not None:  # once, rather than after every success
                self._alt_fail.reset()
            fails = 0
        if calls < self._oscillating[0] and fails < self._oscillating[1]:
            self._osc = None  # the common case, in two comparisons: no run long enough
            return
        limit = self.s.thresholds["oscillation"]
        by_calls = calls >= limit.warn and self._alt_calls.prev2 is not None
        by_fails = fails >= self.s.failing_alternation and self._alt_fail.prev2 is not None
        if not (by_calls or by_fails):
            self._osc = None
            return
        alt = self._alt_calls if by_calls and calls >= fails else self._alt_fail
        if self._osc is None:
            self._osc = (alt.start, alt.line)
        count = max(calls if by_calls else 0, fails)
        pair = sorted({self._tool_of(alt.prev), self._tool_of(alt.prev2)})
        found.append(
            self._sighting(
                "oscillation",
                _level(count, limit),
                "|".join(pair),
                (self._osc[0], self._osc[1]),
                count,
                {"tools": pair, "failing": by_fails},
            )
        )

    def _cascades(self, found: list[Sighting]) -> None:
        # 3 distinct tools failing in the last 5 results; permission denials and
        # infrastructure errors are counted apart (Cline, Roo Code). Ours: the failures must
        # span two turns, since parallel calls of one turn share one cause (a stray `cd`) and
        # the agent has not yet had a chance to react to it.
        # Called after a failure only, the window holding failures only (see _results).
        failing = set(map(_FAILURE, self._results))  # the failure classes in the window
        for cls in (TOOL, PERMISSION, INFRASTRUCTURE):
            tools = distinct_failing(self._results, cls) if cls in failing else []
            if len(tools) < self._cascade_distinct or (
                len({item[4] for item in self._results if item[1] == cls}) < 2  # turns
            ):
                self._cascade.pop(cls, None)
                continue
            if cls not in self._cascade:
                first = next(item for item in self._results if item[1] == cls)
                self._cascade[cls] = (first[2], first[3])
            start, line = self._cascade[cls]
            found.append(
                self._sighting(
                    cls,
                    WARN,
                    cls,
                    (start, line),
                    len(tools),
                    {"tools": tools, "window": self.s.cascade_window},
                )
            )

    def _on_text(self, event: AgentEvent, found: list[Sighting]) -> None:
        if not self._in_turn:
            self._new_turn(event, found)
        if event.model == SYNTHETIC_MODEL:  # the CLI's words (a limit, an API error)
            return
        sig = message_signature(event.text, self.s.min_message_chars)
        if sig is None:
            return
        count = self._message.push(sig, self.seq, event.index)
        limit = self.s.thresholds["repeated_message"]
        if count >= limit.warn:
            found.append(
                self._sighting(
                    "repeated_message",
                    _level(count, limit),
                    sig[:60],
                    (self._message.start, self._message.line),
                    count,
                    partial(_message_evidence, sig),
                )
            )

    def _on_usage(self, event: AgentEvent, found: list[Sighting]) -> None:
        if not self._in_turn:
            self._new_turn(event, found)
        if event.model and self.session_model is None:
            self.model = event.model
        tokens = event.input_tokens
        if not tokens:
            return
        names = (self.session_model, self.model_hint, self.model)  # window(), called only
        window = self._window if names == self._window_names else self.window()  # on a change
        fill = tokens / window
        self.context_tokens, self.context_window, self.context_fill = tokens, window, fill
        if self.peak_context_fill is None or fill > self.peak_context_fill:
            self.peak_context_fill = fill
        last = self._context_last
        if tokens != last:  # a model call since the last usage: how much it added lately
            if last is not None and tokens > last:
                before = self._context_growth
                self._context_growth = (
                    tokens - last if before is None else (before + tokens - last) / 2
                )
            self._context_last = tokens
        if fill < self._context_warn:
            self._context = None  # compaction or a fresh session brought it down
            return
        if self._context is None:
            self._context = (self.seq, event.index)
        # Scaled to the window and to the work: a fill that leaves room for many more model
        # calls at the rate the context has been growing (each call's growth averaged with
        # the ones before; _TYPICAL_GROWTH until one is seen) is no reason to wrap up.
        turns_left = max(0, window - tokens) / (self._context_growth or _TYPICAL_GROWTH)
        if turns_left > self._context_turns[0]:
            return
        urgent = fill >= self._context_urgent and turns_left <= self._context_turns[1]
        level = URGENT if urgent else WARN
        evidence = {
            "tokens": tokens,
            "window": window,
            "fill": fill,
            "model": self.model,
            "turns_left": round(turns_left, 1),
        }
        found.append(
            self._sighting("context", level, "context", self._context, round(fill * 100), evidence)
        )

    def window(self) -> int:
        """The context window: the first configured match among the names we know.

        The session's model (Claude's init says `claude-opus-4-6[1m]`) beats the model of a
        message (`claude-opus-4-6`), which has lost the 1M marker; the mode's model is a hint.
        """
        names = (self.session_model, self.model_hint, self.model)
        if names != self._window_names:
            self._window_names, self._window = names, self.s.default_context_window
            for name in names:
                if name and any(fragment in name for fragment in self.s.context_windows):
                    self._window = self.s.context_window(name)
                    break
        return self._window

    # -- helpers --------------------------------------------------------------------------

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

    def _echoed(self, where: Where) -> tuple[str, ...]:
        """The strings of a failed call's arguments that its error may quote back."""
        args = where[3]
        if args and not self._volatile.isdisjoint(args):
            args = _without(args, self._volatile)
        return echoed_values(args)

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


# The evidence of a loop, a repeated error and a repeated message: built when the sighting's
# Anomaly is asked for (a repeat sighting's is rarely read), from the values of its time.


def _without(args: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    return {key: value for key, value in args.items() if key not in keys}


def _loop_evidence(tool: str, args: str) -> dict[str, Any]:
    return {"tool": tool, "args": short(args, 120)}


def _error_evidence(tool: str, args: str, error: str | None, cls: str | None) -> dict[str, Any]:
    return {
        "tool": tool,
        "args": short(args, 120),
        "error": short(error_head(error), 120).rstrip("."),
        "class": cls,
    }


def _message_evidence(text: str) -> dict[str, Any]:
    return {"text": short(text, 80)}


def _level(count: int, limit: Threshold) -> str:
    return URGENT if limit.urgent is not None and count >= limit.urgent else WARN
