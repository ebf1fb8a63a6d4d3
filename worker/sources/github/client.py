"""A small GitHub REST client on PyGithub's requester, shared by the source and the waits.

- `make_client(settings, store)` builds it from `[github]` settings; the token comes from
  `WORKER_GITHUB_TOKEN` or `GITHUB_TOKEN` and is never logged, stored or put in a message.
- `client.get(path, cache_key=...)` sends `If-None-Match` with the ETag kept in SQLite (kv
  `github:etag:<key>`); a 304 answer is free of rate limit and returns the cached data.
- Rate limits are read from every answer's headers (`client.rate`) and kept in kv
  `github:rate`, so that the next run also knows; `client.polling_allowed()` says whether the
  remaining budget is above `rate_limit_floor`.
- Server errors, timeouts and secondary rate limits (with `Retry-After`) are retried with
  tenacity; what remains is a `GitHubError` whose message is redacted.
- `client.has_write_access(repo, login)` is the trust check (admin, maintain or write).
PyGithub is imported lazily: `worker --help` must stay fast.

The rate limit and the ETag cache are `client_cache.ClientCache`'s, the reads (the token's user,
issues, permissions, the last edit) `client_reads.ClientReads`'s: mixins of `GitHubClient`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from worker.sources.github.client_cache import ClientCache
from worker.sources.github.client_reads import ClientReads, label_event
from worker.sources.github.http import (
    TOKEN_VARIABLES,
    GitHubError,
    RateLimit,
    RateLimitFloor,
    RequestStats,
    Response,
    error_from,
    token_from_env,
    unreachable_because,
)
from worker.sources.github.settings import GitHubSettings

__all__ = [
    "TOKEN_VARIABLES",
    "GitHubClient",
    "GitHubError",
    "RateLimit",
    "RateLimitFloor",
    "RequestStats",
    "Response",
    "label_event",
    "make_client",
    "token_from_env",
]

if TYPE_CHECKING:
    from worker.state.store import Store

log = logging.getLogger(__name__)

_RETRY_STATUS = {500, 502, 503, 504}
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


def make_client(
    settings: GitHubSettings, store: Store | None = None, token: str | None = None
) -> GitHubClient:
    """A client for `settings.base_url`; `store` None keeps ETags in memory only (dry runs)."""
    return GitHubClient(settings, store, token if token is not None else token_from_env())


class GitHubClient(ClientReads, ClientCache):
    def __init__(self, settings: GitHubSettings, store: Store | None, token: str | None) -> None:
        import github  # lazy: PyGithub is heavy

        self.settings = settings
        self.store = store
        self.stats = RequestStats()
        self.rate = RateLimit()
        self._memory: dict[str, str] = {}
        self._login: str | None = None
        self.authenticated = bool(token)
        auth = github.Auth.Token(token) if token else None
        self._gh = github.Github(
            auth=auth,
            base_url=settings.base_url,
            timeout=settings.request_timeout_s,
            retry=None,  # no urllib3 retries: tenacity retries, and counts, every attempt
            per_page=100,
            seconds_between_requests=settings.seconds_between_requests or None,
            seconds_between_writes=settings.seconds_between_writes or None,
        )
        self._requester = self._gh.requester
        self._load_rate()

    @property
    def github(self) -> Any:
        """The underlying `github.Github` (for PyGithub's typed objects where they help)."""
        return self._gh

    # -- requests ---------------------------------------------------------------------------
    def request(
        self,
        verb: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        retry: bool = True,
    ) -> Response:
        """One REST call with retries; raises GitHubError for what remains (4xx, exhausted)."""
        attempts = self.settings.retries + 1 if retry else 1
        retrying = Retrying(
            stop=stop_after_attempt(attempts),
            retry=retry_if_exception(self.retryable),
            wait=self._wait,
            reraise=True,
            before_sleep=lambda state: log.warning(
                "github: %s %s failed (%s); retrying",
                verb,
                path,
                state.outcome.exception() if state.outcome else "?",
            ),
        )
        return retrying(self._once, verb, path, params, body, headers)

    def get(
        self, path: str, *, params: dict[str, Any] | None = None, cache_key: str | None = None
    ) -> Response:
        """GET; with `cache_key`, a conditional request answered from the cache on 304."""
        headers: dict[str, str] = {}
        cached = self._cached(cache_key) if cache_key else None
        if cached is not None:
            headers["If-None-Match"] = cached["etag"]
        response = self.request("GET", path, params=params, headers=headers)
        if response.status == 304 and cached is not None:
            return Response(304, cached["data"], response.headers, not_modified=True)
        etag = response.headers.get("etag")
        if cache_key and etag:
            self._remember(cache_key, {"etag": etag, "data": response.data})
        return response

    def paginate(
        self,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        limit: int = 1000,
        cache_key: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every item of a list answer, following `Link: rel="next"`, up to `limit` items.
        With `cache_key`, each page is a conditional GET (`get`): an unchanged page costs no
        rate limit."""
        url: str | None = path
        params = {"per_page": 100, **(params or {})}
        count, page = 0, 1
        while url is not None:
            key = f"{cache_key}:page{page}" if cache_key and page > 1 else cache_key
            response = self.get(url, params=params, cache_key=key)
            if not isinstance(response.data, list | None):
                raise GitHubError(f"GET {url}: expected a list, got {type(response.data).__name__}")
            for item in response.data or []:
                if not isinstance(item, dict):
                    continue  # not an API object: nothing any caller could read
                yield item
                count += 1
                if count >= limit:
                    return
            match = _NEXT.search(response.headers.get("link", ""))
            url, params, page = (match.group(1) if match else None), None, page + 1

    def _once(
        self,
        verb: str,
        path: str,
        params: dict[str, Any] | None,
        body: Any,
        headers: dict[str, str] | None,
    ) -> Response:
        import requests

        self.stats.requests += 1
        try:
            status, resp_headers, output = self._requester.requestJson(
                verb, path, params, dict(headers or {}), body
            )
        except (requests.Timeout, requests.ConnectionError, TimeoutError, OSError) as exc:
            full = f"{verb} {path}: {type(exc).__name__}: {exc}"
            why = unreachable_because(exc)
            if why is None:
                raise GitHubError(full) from None
            where = urlsplit(self.settings.base_url).netloc or self.settings.base_url
            message = f"cannot reach {where} ({why})"
            raise GitHubError(message, unreachable=True, detail=full) from None
        except ValueError as exc:  # PyGithub could not read the answer's headers (a proxy?)
            raise GitHubError(f"{verb} {path}: unreadable answer: {exc}") from None
        resp_headers = {key.lower(): value for key, value in resp_headers.items()}
        self._read_rate(resp_headers)
        if status == 304:
            self.stats.not_modified += 1
        else:
            self.stats.costed += 1
        data: Any = None
        if output:
            try:
                data = json.loads(output)
            except ValueError:
                data = {"message": output[:200]}
        if status >= 400:
            raise error_from(verb, path, status, resp_headers, data)
        return Response(status, data, resp_headers)

    def retryable(self, exc: BaseException) -> bool:
        """Is `exc` worth another attempt (timeout, 5xx, short secondary rate limit)?"""
        if not isinstance(exc, GitHubError) or isinstance(exc, RateLimitFloor):
            return False
        if exc.unreachable:  # refused, or no such host: the next attempt would be too
            return False
        if exc.status is None or exc.status in _RETRY_STATUS:  # timeout, reset, 5xx
            return True
        # A secondary rate limit says when to come back; a long wait is an error instead.
        return (
            exc.rate_limited
            and exc.retry_after is not None
            and exc.retry_after <= self.settings.max_retry_after_s
        )

    def backoff(self, attempt: int, exc: BaseException | None = None) -> float:
        """Seconds before attempt `attempt + 1`: Retry-After when given, else doubling."""
        if isinstance(exc, GitHubError) and exc.retry_after is not None:
            return exc.retry_after
        return min(30.0, self.settings.backoff_s * 2 ** (attempt - 1))

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        return self.backoff(state.attempt_number, exc)
