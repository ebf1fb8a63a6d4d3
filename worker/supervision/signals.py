"""Pure helpers the detectors share: canonical calls, error signatures, failure classes.

Everything here is a function of its arguments: no state, no I/O, cheap enough to run on
every event of a 100,000-event transcript. Here: the shapes of a run of results (an
alternation, the tools failing alike) and a text shortened for a steering message; the rest
lives by idea beside it, re-exported here: calls in canonical form (canonical.py), what makes
two errors, answers or messages the same and a failure's class (signatures.py), where a call
goes (call_targets.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from worker.supervision.call_targets import (
    SIBLING_ERRORED,
    TARGET_KEYS,
    blur_digits,
    call_target,
    echoed_values,
    waits,
)
from worker.supervision.canonical import (
    _CANONICAL,
    _HEX_SHAPE,
    _MEMO,
    _MEMO_CHARS,
    _VOLATILE_VALUE,
    _encode,
    _strip_ids,
    canonical_args,
    canonical_mixed,
    canonical_strings,
    strip_volatile,
)
from worker.supervision.signatures import (
    _DURATION,
    _TAG,
    INFRASTRUCTURE,
    PERMISSION,
    TOOL,
    _blur,
    _error_text,
    _failure_class,
    _squeeze,
    answer_signature,
    error_head,
    error_signature,
    error_text,
    failure_class,
    message_signature,
    result_signature,
)

# The names kept importable here (and read here by tests: the private ones) that live beside.
__all__ = [
    "INFRASTRUCTURE",
    "PERMISSION",
    "SIBLING_ERRORED",
    "TARGET_KEYS",
    "TOOL",
    "_CANONICAL",
    "_DURATION",
    "_HEX_SHAPE",
    "_TAG",
    "_VOLATILE_VALUE",
    "_blur",
    "_encode",
    "_error_text",
    "_failure_class",
    "_strip_ids",
    "alternation_length",
    "answer_signature",
    "blur_digits",
    "call_target",
    "canonical_args",
    "canonical_mixed",
    "canonical_strings",
    "distinct_failing",
    "echoed_values",
    "error_head",
    "error_signature",
    "error_text",
    "failure_class",
    "message_signature",
    "result_signature",
    "short",
    "strip_volatile",
    "waits",
]


def alternation_length(keys: Sequence[str]) -> int:
    """How many trailing items alternate between exactly two different values (A B A B)."""
    n = len(keys)
    if n < 2 or keys[-1] == keys[-2]:
        return min(n, 1)
    length = 2
    while length < n and keys[n - 1 - length] == keys[n - 1 - length + 2]:
        length += 1
    return length


def distinct_failing(results: Iterable[Sequence[Any]], failure: str) -> list[str]:
    """The distinct tools whose results in `results` (tool, failure class or None, and
    anything after) failed with class `failure`, in order."""
    seen: list[str] = []
    for result in results:
        if result[1] == failure and result[0] not in seen:
            seen.append(result[0])
    return seen


def short(text: str | None, limit: int = 80) -> str:
    """One line, at most `limit` characters, safe inside backticks in a steering message."""
    if not text:
        return ""
    # Memoised for capped texts: a loop's sightings quote the same arguments again and again.
    return _short(text, limit) if len(text) <= _MEMO_CHARS else _shorten(text, limit)


def _shorten(text: str, limit: int) -> str:
    line = _squeeze(text).replace("`", "'")
    return line if len(line) <= limit else line[: limit - 1] + "…"


_short = lru_cache(maxsize=_MEMO)(_shorten)
