"""Run counters for the detectors: equal keys in a row, and two keys alternating.

Both keep O(1) state, so the detectors stay linear over any length of stream.
"""

from __future__ import annotations

from typing import Any


class Streak:
    """A run of equal keys: its length and where it started."""

    __slots__ = ("count", "key", "line", "start")

    def __init__(self) -> None:
        self.key: Any = None
        self.count = 0
        self.start = 0
        self.line = 0

    def push(self, key: Any, seq: int, line: int) -> int:
        if key == self.key:
            self.count += 1
        else:
            self.key, self.count, self.start, self.line = key, 1, seq, line
        return self.count

    def reset(self) -> None:
        self.key, self.count = None, 0


class Alternation:
    """A run of keys alternating between two values (A B A B), kept incrementally."""

    __slots__ = ("length", "line", "prev", "prev2", "prev_at", "start")

    def __init__(self) -> None:
        self.prev: str | None = None
        self.prev2: str | None = None
        self.prev_at = (0, 0)
        self.length = 0
        self.start = 0
        self.line = 0

    def push(self, key: str, seq: int, line: int) -> int:
        if self.prev is None or key == self.prev:
            self.length, self.start, self.line = 1, seq, line
        elif key == self.prev2 and self.length >= 2:
            self.length += 1
        else:
            self.length = 2
            self.start, self.line = self.prev_at
        self.prev2, self.prev, self.prev_at = self.prev, key, (seq, line)
        return self.length

    def reset(self) -> None:
        self.prev = self.prev2 = None
        self.length = 0


class Cycle:
    """The same sequence of `shortest` to `longest` steps coming round again (A B C A B C),
    kept incrementally: for each period p, how many steps in a row equal the step p before
    them. A run of one step (A A A) is a loop, not a cycle, and is left to the loop check."""

    __slots__ = (
        "_at",
        "_going",
        "_periods",
        "_runs",
        "_same",
        "_since",
        "_steps",
        "line",
        "matched",
        "period",
        "start",
    )

    def __init__(self, longest: int = 4, shortest: int = 2) -> None:
        self._steps: list[Any] = []  # the last `longest` steps, oldest first
        self._at: list[tuple[int, int]] = []  # their (seq, line)
        self._runs = [0] * (longest + 1)
        self._periods = range(shortest, longest + 1)
        self._since = [(0, 0)] * (longest + 1)  # where each period's run began
        self._same = 0  # the last steps that are one step again (A A A): 3
        self._going = False  # whether a run may be going (else every run is 0)
        self.period = 0  # of the cycle the last push found, 0 for none
        self.matched = 0  # its steps that equal the step a period before them
        self.start = 0
        self.line = 0

    def push(self, key: Any, seq: int, line: int) -> int:
        """Add a step; how many times the longest-running cycle has come round (2 once a
        sequence is seen twice in a row), 0 when none has."""
        steps, runs = self._steps, self._runs
        if key not in steps:  # the common case, in C: nothing comes round
            self._skip(key, seq, line)
            return 0
        if self._same >= len(steps) and steps[0] == key:
            # One step over and over (a loop, not a cycle): the runs are left as they are,
            # the next other step is none of these and ends them all.
            self._same += 1
            self._going = True
            self.period = 0
            steps.append(key)
            self._at.append((seq, line))
            if len(steps) >= len(runs):
                del steps[0], self._at[0]
            return 0
        self._going = True
        n, best, period = len(steps), 0, 0
        same = self._same = self._same + 1 if steps[-1] == key else 1
        for p in self._periods:
            if p > n:
                break
            if steps[n - p] == key:
                runs[p] += 1
                if runs[p] == 1:
                    self._since[p] = self._at[n - p]
                # Two rounds or more, and not one step over and over (a loop).
                if runs[p] >= p and same < p:
                    rounds = (runs[p] + p) // p
                    if rounds > best:
                        best, period = rounds, p
            else:
                runs[p] = 0
        self.period = period
        if period:
            self.matched = runs[period]
            self.start, self.line = self._since[period]
        steps.append(key)
        self._at.append((seq, line))
        if n + 1 > len(runs) - 1:
            del steps[0], self._at[0]
        return best

    def _skip(self, key: Any, seq: int, line: int) -> None:
        """Add a step that is none of the last ones: every run ends."""
        if self._going:
            self._runs = [0] * len(self._runs)
            self._going = False
        self._same, self.period = 1, 0
        steps = self._steps
        steps.append(key)
        self._at.append((seq, line))
        if len(steps) >= len(self._runs):
            del steps[0], self._at[0]

    def fails(self) -> bool:
        """Whether the cycle last found holds a failing step (a key whose last item, the
        outcome, starts with "!")."""
        period = self.period
        return period > 0 and any(str(step[-1]).startswith("!") for step in self._steps[-period:])

    def reset(self) -> None:
        if self._steps:
            self._steps.clear()
            self._at.clear()
            self._runs = [0] * len(self._runs)
        self._going = False
        self._same = 0
        self.period = 0


class Cycles:
    """The two counts of cycles the detectors keep, fed in one call: of steps whose results
    are alike (`alike`, 2 steps or more), and of calls and their failures whatever the other
    results say (`calls`, 3 steps or more, counted only when a step fails)."""

    __slots__ = ("alike", "calls")

    def __init__(self, longest: int = 4) -> None:
        self.alike = Cycle(longest)
        self.calls = Cycle(longest, 3)

    def push(self, alike: Any, calls: Any, seq: int, line: int) -> tuple[int, Cycle]:
        """Both steps added: how many times the stronger cycle came round, and which."""
        one, two = self.alike, self.calls
        steps, others = one._steps, two._steps
        if alike not in steps and calls not in others:  # nothing comes round: every run ends
            # Cycle._skip of both, written out: this runs for most results of a stream.
            if one._going or two._going:
                one._skip(alike, seq, line)
                two._skip(calls, seq, line)
                return 0, one
            one._same = two._same = 1
            one.period = two.period = 0
            at = (seq, line)
            steps.append(alike)
            others.append(calls)
            one._at.append(at)
            two._at.append(at)
            if len(steps) >= len(one._runs):
                del steps[0], one._at[0]
            if len(others) >= len(two._runs):
                del others[0], two._at[0]
            return 0, one
        rounds = one.push(alike, seq, line)
        loose = two.push(calls, seq, line)
        if loose > rounds and two.fails():
            return loose, two
        return rounds, one

    def reset(self) -> None:
        self.alike.reset()
        self.calls.reset()
