"""Where a call goes: the target it acts on (a file, a page, a shell command's program and
paths), whether it waits (polling), which of its arguments an error may quote back.

Pure and memoised like the rest of signals.py, which re-exports these names.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from worker.supervision.canonical import _MEMO, _strip_ids
from worker.supervision.signatures import _PATH, _squeeze

# Claude Code's answer to the other calls of a parallel batch when one of them fails: they
# never ran, so they are not failures of their own.
SIBLING_ERRORED = "Sibling tool call errored"
# The argument that names what a call acts on (a file, a folder, a page, an element).
_TARGET_KEYS = (
    "file_path",
    "path",
    "notebook_path",
    "filePath",
    "absolute_path",
    "file",
    "filename",
    "dir",
    "directory",
    "url",
    "uri",
    "selector",
    "element",
    "target",
    "ref",
)
_NAMED = frozenset(_TARGET_KEYS)
_SHELL = ("command", "cmd", "code", "script")
_SHELL_SET = frozenset(_SHELL)
# Arguments that are the agent's prose (a message to a person, a thought): worded anew each
# time, they say nothing about where the call goes.
_PROSE = frozenset(
    {"message", "content", "text", "body", "thought", "reason", "summary", "explanation"}
    | {"note", "question", "prompt"}
)
# A call whose purpose is to wait (polling CI between checks): a cycle around it is polling.
_WAITS = re.compile(
    r"(?i)(?:^|[;&|(]\s*)(?:sleep|wait|timeout)\b|\bgh\s+(?:run|pr)\s+(?:watch|checks\s+--watch)"
)
_TRANSLATE_DIGITS = str.maketrans("0123456789", "##########")
_ASCII_DIGITS = bytes(ord("#") if 48 <= c <= 57 else c for c in range(256))


def blur_digits(text: str) -> str | bytes:
    """`text` with every digit a `#`, to compare with another so blurred (the bytes of an
    ASCII text, translated in one C pass ten times faster than str.translate's table)."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_DIGITS)
    return text.translate(_TRANSLATE_DIGITS)


def echoed_values(args: dict[str, Any] | None) -> tuple[str, ...]:
    """The call's string arguments an error may quote back (an Edit's `old_string`), longest
    first, at most 8; short ones (a flag, a number) are left in."""
    if not args:
        return ()
    values = [v for v in args.values() if isinstance(v, str) and 4 <= len(v) <= 2000]
    return tuple(sorted({_squeeze(v) for v in values}, key=len, reverse=True)[:8])


# Every key call_target and waits read.
TARGET_KEYS = _NAMED | _SHELL_SET | _PROSE


def call_target(args: dict[str, Any] | None) -> tuple[str, bool]:
    """What a call acts on, and whether its arguments hold prose: the first target-like
    argument; for a shell command, its program and the paths it names (`ls /a/b` and `ls /a`
    go to different places, two `python -c` one-liners to the same one); otherwise none (the
    other arguments are a payload: an Edit's strings, a message). Ids blurred."""
    if not args:
        return "", False
    prose = not _PROSE.isdisjoint(args)
    named = _NAMED.intersection(args)  # usually none or one: looked for in C
    for key in _TARGET_KEYS if len(named) > 1 else named:
        value = args.get(key)
        if isinstance(value, str) and value:
            return _strip_ids(value[:300]), prose
    for key in _SHELL if not _SHELL_SET.isdisjoint(args) else ():
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return _strip_ids(_shell_target(value[:2000])), prose
    return "", prose  # acts on nothing named: other arguments are its payload


@lru_cache(maxsize=_MEMO)
def _shell_target(command: str) -> str:
    words = command.split(None, 1)
    paths = _PATH.findall(command)
    return " ".join([words[0] if words else "", *paths])[:300]


def waits(args: dict[str, Any] | None) -> bool:
    """A call that waits (a shell `sleep`, `gh run watch`): what polling is made of."""
    if not args:
        return False
    for key in _SHELL:
        value = args.get(key)
        if isinstance(value, str) and _WAITS.search(value[:500]):
            return True
    return False
