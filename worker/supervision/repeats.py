"""Errors that come back from outside the agent's own tool calls.

* A CLI-level error (an `error` event, a failed result) repeating across sessions: the model
  never got to work because the CLI itself failed (a bad key, a usage limit, an API that is
  down). Urgent, it becomes an `InfraFailure` the task loop can treat as the infrastructure's
  fault rather than the task's.
* A harness or user rejecting the agent's answer in plain user text, again and again (a format
  error, a correction): a repeated error.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from worker.models import InfraFailure, InfraKind
from worker.supervision.anomaly import URGENT, WARN, Anomaly
from worker.supervision.settings import Threshold
from worker.supervision.signals import message_signature, result_signature, short
from worker.supervision.streaks import Streak

_AUTH = re.compile(r"(?i)\b(401|403)\b|unauthori[sz]ed|authenticat|invalid api key|forbidden")
_LIMIT = re.compile(r"(?i)usage limit|hit your limit|quota|insufficient_quota|limit reached")
_STATUS = re.compile(r"\b(401|403|429|5\d\d)\b")
# A CLI's notice that it is retrying is not the error itself (Codex prints "Reconnecting...
# 1/5" before the real "exceeded retry limit, last status: 401").
_RETRY_NOTICE = re.compile(r"(?i)^\s*(reconnecting|retrying)\b")


def infra_failure(text: str, sessions: int) -> InfraFailure:
    """The shared infrastructure-failure shape for a CLI error seen in `sessions` sessions."""
    status = _STATUS.search(text)
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


class CliErrors:
    """Each CLI error text counted once per session; a tool result (the CLI works) forgets
    them all, so a CLI's own retries within a session or a flaky start do not add up."""

    __slots__ = ("_errors", "_session", "infra", "worked")

    def __init__(self) -> None:
        # signature -> [sessions counted, last session counted, seq, line]
        self._errors: dict[str, list[int]] = {}
        self._session = 0
        self.infra: InfraFailure | None = None  # set once an error is urgent
        # A tool result: the CLI works, forget its errors. The dict's own clear, called
        # without a Python frame, since every tool result of a stream says so.
        self.worked: Callable[[], None] = self._errors.clear

    def new_session(self) -> None:
        self._session += 1

    def observe(self, text: str, seq: int, line: int, limit: Threshold) -> Anomaly | None:
        """Count one CLI error at event `seq`; the `cli_error` anomaly once it repeats."""
        if _RETRY_NOTICE.match(text):
            return None
        key = result_signature(text)[:300]
        entry = self._errors.setdefault(key, [0, -1, seq, line])
        if entry[1] != self._session:
            entry[0] += 1
            entry[1] = self._session
        sessions = entry[0]
        if sessions < limit.warn:
            return None
        level = _level(sessions, limit)
        if level != WARN:
            self.infra = infra_failure(text, sessions)
        evidence = {"error": short(text, 120)}
        return Anomaly("cli_error", level, key[:60], entry[2], seq, sessions, entry[3], evidence)


class Rejections:
    """The same rejection or correction in user text, again and again."""

    __slots__ = ("_streak",)

    def __init__(self) -> None:
        self._streak = Streak()

    def reset(self) -> None:
        """The agent made progress: the rejections before no longer count."""
        self._streak.reset()

    def observe(
        self, text: str, seq: int, line: int, limit: Threshold | None, min_chars: int
    ) -> Anomaly | None:
        sig = message_signature(result_signature(text), min_chars)
        if sig is None or limit is None:
            return None
        streak = self._streak
        count = streak.push(sig, seq, line)
        if count < limit.warn:
            return None
        evidence = {"tool": "the harness", "args": "", "error": short(text, 120)}
        key = f"user {sig[:60]}"
        return Anomaly(
            "repeated_error",
            _level(count, limit),
            key,
            streak.start,
            seq,
            count,
            streak.line,
            evidence,
        )


def _level(count: int, limit: Threshold) -> str:
    return URGENT if limit.urgent is not None and count >= limit.urgent else WARN
