"""The plain parts of the GitHub client: errors, answers, rate-limit state, the token.

Kept apart from github_client so that both stay small; import them from github_client.
"""

from __future__ import annotations

import errno
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from worker.errors import WorkerError
from worker.process.proc import redact

TOKEN_VARIABLES = ("WORKER_GITHUB_TOKEN", "GITHUB_TOKEN")


class GitHubError(WorkerError):
    """A GitHub request failed after its retries; the message names the request, never the token."""

    def __init__(
        self,
        message: str,
        status: int | None = None,
        retry_after: float | None = None,
        rate_limited: bool = False,
        unreachable: bool = False,
        detail: str = "",
    ) -> None:
        super().__init__(redact(message))
        self.status = status
        self.retry_after = retry_after
        self.rate_limited = rate_limited
        # The server cannot be reached at all (refused, no such host): not worth a retry.
        self.unreachable = unreachable
        self.detail = redact(detail) or str(self)  # the whole error, for the log file


class RateLimitFloor(GitHubError):
    """Fewer requests left than the floor: the source stops polling until the reset."""


@dataclass
class RateLimit:
    remaining: int | None = None
    limit: int | None = None
    reset: float | None = None  # epoch seconds

    def describe(self) -> str:
        when = time.strftime("%H:%M:%S UTC", time.gmtime(self.reset)) if self.reset else "?"
        return f"{self.remaining} of {self.limit} requests left, reset at {when}"


@dataclass
class Response:
    status: int
    data: Any
    headers: dict[str, str] = field(default_factory=dict)
    not_modified: bool = False


@dataclass
class RequestStats:
    requests: int = 0
    costed: int = 0  # answers other than 304: what counts against the rate limit
    not_modified: int = 0


def token_from_env(env: dict[str, str] | None = None) -> str | None:
    """The token from WORKER_GITHUB_TOKEN (preferred) or GITHUB_TOKEN; None when unset."""
    env = dict(os.environ) if env is None else env
    for name in TOKEN_VARIABLES:
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def error_from(
    verb: str, path: str, status: int, headers: dict[str, str], data: Any
) -> GitHubError:
    message = (data or {}).get("message", "") if isinstance(data, dict) else ""
    retry_after = to_float(headers.get("retry-after"))
    primary = status in (403, 429) and headers.get("x-ratelimit-remaining") == "0"
    secondary = status in (403, 429) and (
        retry_after is not None or "secondary rate limit" in message.lower()
    )
    text = f"{verb} {path}: HTTP {status}" + (f" {message}" if message else "")
    if primary and not secondary:
        reset = to_float(headers.get("x-ratelimit-reset"))
        when = time.strftime("%H:%M:%S UTC", time.gmtime(reset)) if reset else "?"
        text += f" (rate limit exhausted until {when})"
    return GitHubError(text, status, retry_after, rate_limited=primary or secondary)


def to_float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def to_int(value: str | None) -> int | None:
    number = to_float(value)
    return int(number) if number is not None else None


_UNREACHABLE = {
    errno.ECONNREFUSED: "connection refused",
    errno.EHOSTUNREACH: "no route to the host",
    errno.ENETUNREACH: "network unreachable",
}


def unreachable_because(exc: BaseException) -> str | None:
    """Why a connection could not be made at all, in words (`connection refused`, `unknown
    host`), or None for a failure worth another try (a timeout, a connection reset). Looks
    down the chain requests and urllib3 wrap the socket's error in."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        item = todo.pop()
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, socket.gaierror):
            return "unknown host"
        if isinstance(item, ConnectionRefusedError):  # its errno differs on Windows
            return "connection refused"
        if isinstance(item, OSError) and item.errno in _UNREACHABLE:
            return _UNREACHABLE[item.errno]
        todo += [item.__cause__, item.__context__, getattr(item, "reason", None), *item.args]
    return None
