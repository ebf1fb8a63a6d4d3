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
    """The same sequence of 2 to `longest` steps coming round again (A B C A B C), kept
    incrementally: for each period p, how many steps in a row equal the step p before them.
    A run of one step (A A A) is a loop, not a cycle, and is left to the loop check."""

    __slots__ = ("_at", "_runs", "_since", "_steps", "line", "matched", "period", "start")

    def __init__(self, longest: int = 4) -> None:
        self._steps: list[Any] = []  # the last `longest` steps, oldest first
        self._at: list[tuple[int, int]] = []  # their (seq, line)
        self._runs = [0] * (longest + 1)
        self._since = [(0, 0)] * (longest + 1)  # where each period's run began
        self.period = 0  # of the cycle the last push found, 0 for none
        self.matched = 0  # its steps that equal the step a period before them
        self.start = 0
        self.line = 0

    def push(self, key: Any, seq: int, line: int) -> int:
        """Add a step; how many times the longest-running cycle has come round (2 once a
        sequence is seen twice in a row), 0 when none has."""
        steps, runs = self._steps, self._runs
        n, best, period = len(steps), 0, 0
        for p in range(2, n + 1):
            if steps[n - p] == key:
                runs[p] += 1
                if runs[p] == 1:
                    self._since[p] = self._at[n - p]
                rounds = (runs[p] + p) // p
                if rounds > best and runs[p] >= p and _varied(steps, p):
                    best, period = rounds, p
            else:
                runs[p] = 0
        self.period = period
        self.matched = runs[period] if period else 0
        if period:
            self.start, self.line = self._since[period]
        steps.append(key)
        self._at.append((seq, line))
        if n + 1 > len(runs) - 1:
            del steps[0], self._at[0]
        return best

    def fails(self) -> bool:
        """Whether the cycle last found holds a failing step (a key whose last item, the
        outcome, starts with "!")."""
        period = self.period
        return period > 0 and any(str(step[-1]).startswith("!") for step in self._steps[-period:])

    def reset(self) -> None:
        self._steps.clear()
        self._at.clear()
        self._runs = [0] * len(self._runs)
        self.period = 0


def _varied(steps: list[Any], p: int) -> bool:
    """Whether the last p steps hold two different steps (else it is a loop)."""
    last = steps[-p:]
    return any(step != last[0] for step in last)
