"""The rate limit and the ETag cache of `GitHubClient` (a mixin): the limit is read from every
answer's headers and kept in kv `github:rate`, so that the next run also knows; each cached
answer's ETag and data in kv `github:etag:<key>`; both in memory without a store (dry runs).
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

from worker.sources.github.http import RateLimit, to_float, to_int
from worker.sources.github.settings import GitHubSettings

if TYPE_CHECKING:
    from worker.state.store import Store


class ClientCache:
    """`GitHubClient`'s rate limit and ETag cache (a mixin: the settings and store are the
    client's)."""

    settings: GitHubSettings
    store: Store | None
    rate: RateLimit
    _memory: dict[str, str]

    # -- rate limit -------------------------------------------------------------------------
    def _read_rate(self, headers: dict[str, str]) -> None:
        remaining = to_int(headers.get("x-ratelimit-remaining"))
        if remaining is None:  # absent, or not a number (a proxy's answer): keep what we knew
            return
        self.rate = RateLimit(
            remaining,
            to_int(headers.get("x-ratelimit-limit")),
            to_float(headers.get("x-ratelimit-reset")),
        )
        self._put("github:rate", json.dumps(self.rate.__dict__))

    def _load_rate(self) -> None:
        raw = self._get("github:rate")
        if raw:
            with contextlib.suppress(ValueError, TypeError):
                self.rate = RateLimit(**json.loads(raw))

    def polling_allowed(self, now: float | None = None) -> bool:
        """False while fewer than `rate_limit_floor` requests are left and the reset is ahead."""
        now = time.time() if now is None else now
        rate = self.rate
        if rate.remaining is None or rate.remaining >= self.settings.rate_limit_floor:
            return True
        return rate.reset is not None and rate.reset <= now

    # -- the ETag cache ---------------------------------------------------------------------
    def _cached(self, key: str) -> dict[str, Any] | None:
        raw = self._get(f"github:etag:{key}")
        if not raw:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return value if isinstance(value, dict) and "etag" in value else None

    def _remember(self, key: str, value: dict[str, Any]) -> None:
        self._put(f"github:etag:{key}", json.dumps(value))

    def _get(self, key: str) -> str | None:
        if self.store is not None:
            return self.store.get(key)
        return self._memory.get(key)

    def _put(self, key: str, value: str) -> None:
        if self.store is not None:
            self.store.put(key, value)
        else:
            self._memory[key] = value
