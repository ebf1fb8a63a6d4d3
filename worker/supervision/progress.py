"""What counts as progress, and a CLI error that keeps coming back.

Progress is anything that changes the world or what the agent knows (Magentic-One's "is
progress being made" question, answered from the events): a call never made before, or a call
made before whose result is different now (a test that changed, a CI run that finished, a file
that now reads differently). A file change is progress whichever way it was made: the CLI's edit
tool, or a shell command that writes (`sed -i`, `cat >`, `apply_patch`, `git commit`). Repeating
a call and getting the same answer teaches nothing: that is what a loop is.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from worker.models import InfraFailure, InfraKind
from worker.supervision.signals import result_signature

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


def shell_writes(args: dict[str, Any] | None) -> bool:
    """A shell (or SWE-agent) command that changes a file or the repository."""
    if not args:
        return False
    for key in _SHELL_KEYS:
        value = args.get(key)
        if isinstance(value, list):
            value = " ".join(str(part) for part in value)
        if isinstance(value, str) and _WRITES.search(value):
            return True
    return False


class Knowledge:
    """The calls seen so far and what each last returned: is this result new information?"""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, bytes] = {}

    def learn(self, call: str, signature: str) -> bool:
        """Record a successful call's result (its `answer_signature`); True when the call or
        its answer is new."""
        digest = hashlib.blake2b(signature.encode("utf-8", "replace"), digest_size=8).digest()
        key = hashlib.blake2b(call.encode("utf-8", "replace"), digest_size=8).hexdigest()
        new = self._seen.get(key) != digest
        self._seen[key] = digest
        return new


_AUTH = re.compile(r"(?i)\b(401|403)\b|unauthori[sz]ed|authenticat|invalid api key|forbidden")
_LIMIT = re.compile(r"(?i)usage limit|hit your limit|quota|insufficient_quota|limit reached")


def infra_failure(text: str, sessions: int) -> InfraFailure:
    """The shared infrastructure-failure shape for a CLI error seen in `sessions` sessions."""
    status = re.search(r"\b(401|403|429|5\d\d)\b", text)
    if _AUTH.search(text):
        kind = InfraKind.AUTH
    elif _LIMIT.search(text):
        kind = InfraKind.USAGE_LIMIT
    else:
        kind = InfraKind.UNAVAILABLE
    head = text.strip().splitlines()[0][:200] if text.strip() else "an error"
    return InfraFailure(
        kind=kind,
        message=f"the agent CLI failed the same way in {sessions} sessions in a row: {head}",
        http_status=int(status.group(1)) if status else None,
    )


# A CLI's notice that it is retrying is not the error itself (Codex prints "Reconnecting...
# 1/5" before the real "exceeded retry limit, last status: 401").
_RETRY_NOTICE = re.compile(r"(?i)^\s*(reconnecting|retrying)\b")


class CliErrors:
    """A CLI-level error (an `error` event, a failed result) repeating across sessions.

    The model never got to work: the CLI itself failed (a bad key, a usage limit, an API that is
    down). Each error text is counted once per session, so a CLI's own retries within a session
    do not inflate it; a tool result (the CLI works) forgets them all.
    """

    __slots__ = ("_errors", "_session")

    def __init__(self) -> None:
        # signature -> [sessions counted, last session counted, seq, line, text]
        self._errors: dict[str, list[Any]] = {}
        self._session = 0

    def new_session(self) -> None:
        self._session += 1

    def worked(self) -> None:
        """The agent got a tool result: the CLI works."""
        self._errors.clear()

    def push(self, text: str, seq: int, line: int) -> tuple[str, int, tuple[int, int]] | None:
        """Count one CLI error: (its signature, sessions it repeated in, where it started)."""
        if _RETRY_NOTICE.match(text):
            return None
        key = result_signature(text)[:300]
        entry = self._errors.get(key)
        if entry is None:
            entry = self._errors[key] = [0, -1, seq, line, text]
        if entry[1] != self._session:
            entry[0] += 1
            entry[1] = self._session
        return key, entry[0], (entry[2], entry[3])
