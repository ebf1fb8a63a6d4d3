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
