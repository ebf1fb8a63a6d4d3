"""Patterns over the results of tool calls: the same error again (exploration aside), a file's
edits failing in a row, an oscillation between two calls or two failing tools, a cycle of a
few steps coming round, and a cascade of distinct tools failing."""

from __future__ import annotations

from collections import deque
from functools import partial
from operator import itemgetter
from typing import Any

from worker.supervision.anomaly import URGENT, WARN, Sighting
from worker.supervision.detect_base import DetectorBase, Where, threshold_level
from worker.supervision.edits import EditStreaks
from worker.supervision.settings import SupervisionSettings, Threshold
from worker.supervision.signals import (
    INFRASTRUCTURE,
    PERMISSION,
    TOOL,
    blur_digits,
    distinct_failing,
    error_head,
    short,
)
from worker.supervision.streaks import Alternation, Cycle, Cycles, Streak

# The failure class of a failure in the cascade window (`map` runs in C, where a generator
# over the window costs a Python frame per item).
_FAILURE = itemgetter(1)


class PatternDetectors(DetectorBase):
    """Repeated error, edit failure, oscillation, cycle and cascade."""

    def __init__(self, settings: SupervisionSettings, model: str | None = None) -> None:
        super().__init__(settings, model)
        self._edits = EditStreaks()
        self._fail = Streak()
        self._alt_calls = Alternation()
        self._alt_fail = Alternation()
        self._cycles_of = Cycles(settings.cycle_longest)
        self._fail_turn = -1  # the turn (parallel batch) of the failure last counted
        self._fail_targets: set[str | bytes] = set()  # what the streak's failures acted on
        self._fail_moved = 0  # failures of the streak that went somewhere new
        self._osc: tuple[int, int] | None = None  # (start, line) of the live oscillation
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
                    threshold_level(count, limit),
                    f"{tool} {sig[1]}",
                    (streak.start, streak.line),
                    count,
                    partial(_error_evidence, tool, args, error, cls),
                )
            )

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
                "edit_failure", threshold_level(count, limit), file, (start, first), count, evidence
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
                threshold_level(count, limit),
                "|".join(pair),
                (self._osc[0], self._osc[1]),
                count,
                {"tools": pair, "failing": by_fails},
            )
        )

    def _cycle(
        self, tool: str, target: str, rounds: int, cycle: Cycle, found: list[Sighting]
    ) -> None:
        """A cycle that came round `rounds` times: of steps whose results are alike, or (3
        steps or more) of the same calls (prose aside) and the same failure, the other results
        worded anew (a colleague's reply, a page's text)."""
        limit = self.s.thresholds["cycle"]
        level = threshold_level(rounds, limit) if rounds >= limit.warn else None
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


def _error_evidence(tool: str, args: str, error: str | None, cls: str | None) -> dict[str, Any]:
    return {
        "tool": tool,
        "args": short(args, 120),
        "error": short(error_head(error), 120).rstrip("."),
        "class": cls,
    }
