"""Small helpers for reading JSON lines of agent CLIs: tolerant, never raising."""

from __future__ import annotations

import json
from typing import Any


def parse(line: str) -> dict[str, Any] | str | None:
    """A line's JSON object; None for a blank line; the problem's text when it is not one."""
    line = line.strip()
    if not line:
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"not JSON: {exc.msg}"
    return obj if isinstance(obj, dict) else "not a JSON object"


def message_of(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return as_str(value.get("message")) or json.dumps(value)[:500]
    return str(value)[:500]


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
