"""What counts as progress, and a CLI error that keeps coming back.

Progress is anything that changes the world or what the agent knows (Magentic-One's "is
progress being made" question, answered from the events): a call never made before, or a call
made before whose result is different now (a test that changed, a CI run that finished, a file
that now reads differently). A file change is progress whichever way it was made: the CLI's edit
tool, or a shell command that writes (`sed -i`, `cat >`, `apply_patch`, `git commit`). Repeating
a call and getting the same answer teaches nothing: that is what a loop is.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

# Shell commands that change files or the repository. `>` and `>>` redirect into a file, except
# into /dev/null or a file descriptor (`2>&1`).
_WRITES = re.compile(
    r"(?:\bsed\s+(?:-[a-zA-Z]*\s+)*-i|\bperl\s+-[a-zA-Z]*i|\bapply_patch\b|\bgit\s+"
    r"(?:commit|apply|am|merge|rebase|cherry-pick|revert|checkout\s+--|restore|rm|mv)\b|\bpatch\s"
    r"|\btee\b|\bmv\s|\bcp\s|\brm\s|\bmkdir\s|\btouch\s|\btruncate\s|\bln\s"
    r"|(?<![0-9&<>])>>?\s*(?!&|/dev/null)[\w./~\"'$-]"
    r"|\bcreate\s+\S|\bedit\s+\d+:\d+|\bstr_replace|\binsert\s+\d)"
)
_SHELL_KEYS = ("command", "cmd", "code", "script")
SHELL_KEYS = frozenset(_SHELL_KEYS)  # the only keys shell_writes reads


def shell_writes(args: dict[str, Any] | None) -> bool:
    """A shell (or SWE-agent) command that changes a file or the repository."""
    if not args or SHELL_KEYS.isdisjoint(args):  # most calls hold none: one C call
        return False
    for key in _SHELL_KEYS:
        value = args.get(key)
        if value is None:
            continue
        if isinstance(value, list):
            value = " ".join(str(part) for part in value)
        if isinstance(value, str) and (_writes(value) if len(value) <= 4000 else _write(value)):
            return True
    return False


def _write(command: str) -> bool:
    return _WRITES.search(command) is not None


_writes = lru_cache(maxsize=512)(_write)  # a loop runs the same command again and again


class Knowledge:
    """The calls seen so far and what each last returned: is this result new information?"""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[int, int] = {}

    def learn(self, call: str, signature: str) -> bool:
        """Record a successful call's result (its `answer_signature`); True when the call or
        its answer is new."""
        # 64-bit digests keep the memory small; Python's own string hash (SipHash) is one,
        # ten times cheaper than blake2b, and a Knowledge lives no longer than its process.
        digest, key = hash(signature), hash(call)
        new = self._seen.get(key) != digest
        self._seen[key] = digest
        return new
