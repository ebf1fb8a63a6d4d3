"""The heartbeat: a dead-man's switch that tells the operator when the schedule stops.

With `[notify] heartbeat_url` set, every run (an idle one too) pings it once, at its end: the
URL itself after a run that did its work and `<url>/fail` after one that failed; with
`heartbeat_start` also `<url>/start` when it starts, with one `rid` for both (so the service
times each run): healthchecks.io's convention, which Cronitor and Uptime Kuma's push monitors
take too. A service that hears nothing for longer than the
schedule's period says so. A ping never holds a run up for more than `TIMEOUT_S` (it is left
unanswered after that), and a failed one is logged, never raised. The last ping is kept in
`<state>/heartbeat.json` for `worker doctor`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from enum import StrEnum

from worker.config import Settings
from worker.process.lazyimport import lazy
from worker.state.fsutil import atomic_write_text, read_text
from worker.state.run_report import RunReport

log = logging.getLogger(__name__)
_request = lazy("urllib.request")  # http.client and ssl, only with a URL to ping

TIMEOUT_S = 3.0  # the most a ping holds a run up
FILE = "heartbeat.json"


class Ping(StrEnum):
    START = "start"
    SUCCESS = "success"
    FAIL = "fail"


@dataclass(frozen=True)
class LastPing:
    """What `heartbeat.json` keeps of the last ping."""

    kind: str
    at: str  # UTC, ISO 8601
    ok: bool
    detail: str  # `HTTP 200`, or why it failed
    url: str  # scheme and host only: the rest of a ping URL is its key


def shown(url: str) -> str:
    """`https://hc-ping.com/…`: a ping URL's path is the check's key, never printed."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}/…"


def ping_url(base: str, kind: Ping, rid: str) -> str:
    """`base` + `/start` or `/fail` (nothing for success), with `rid` in its query."""
    parts = urllib.parse.urlsplit(base)
    path = parts.path.rstrip("/") + ("" if kind is Ping.SUCCESS else f"/{kind.value}")
    query = urllib.parse.urlencode([*urllib.parse.parse_qsl(parts.query), ("rid", rid)])
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path or "/", query, ""))


class Heartbeat:
    """The pings of one run (one `rid`); does nothing without a `heartbeat_url`."""

    def __init__(self, settings: Settings) -> None:
        self.url = settings.notify.heartbeat_url
        self.record = settings.state / FILE
        self.rid = str(uuid.uuid4())

    def ping(self, kind: Ping, summary: str = "") -> None:
        """Send one ping, waiting at most TIMEOUT_S for it; its result kept for doctor."""
        if not self.url:
            return
        result: list[LastPing] = []
        sender = threading.Thread(
            target=lambda: result.append(self._send(kind, summary)), daemon=True
        )
        sender.start()
        sender.join(TIMEOUT_S)
        last = result[0] if result else self._last(kind, False, f"no answer in {TIMEOUT_S:g} s")
        if not last.ok:
            log.warning("heartbeat %s to %s failed: %s", kind.value, last.url, last.detail)
        try:
            atomic_write_text(self.record, json.dumps(asdict(last)) + "\n")
        except OSError as exc:
            log.warning("heartbeat: cannot write %s: %s", self.record, exc)

    def _send(self, kind: Ping, summary: str) -> LastPing:
        assert self.url is not None
        request = _request.Request(
            ping_url(self.url, kind, self.rid),
            data=summary.encode("utf-8"),
            headers={"Content-Type": "text/plain; charset=utf-8", "User-Agent": "worker"},
            method="POST",
        )
        try:
            with _request.urlopen(request, timeout=TIMEOUT_S) as answer:
                return self._last(kind, True, f"HTTP {answer.status}")
        except Exception as exc:  # an error is logged and kept, never raised into the run
            return self._last(kind, False, f"{type(exc).__name__}: {exc}")

    def _last(self, kind: Ping, ok: bool, detail: str) -> LastPing:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        key = urllib.parse.urlsplit(self.url or "").path.strip("/")  # an error may quote it
        detail = detail.replace(key, "…") if key else detail
        return LastPing(kind.value, stamp, ok, detail, shown(self.url or ""))


@contextlib.contextmanager
def around_run(settings: Settings) -> Iterator[Callable[[RunReport], None]]:
    """`/start` now (with `heartbeat_start`); at the end the URL, or `/fail` after a failed run
    (its exit code not 0) or one that raised. The block hands its report to the function it is
    given."""
    beat = Heartbeat(settings)
    if settings.notify.heartbeat_start:
        beat.ping(Ping.START)
    reports: list[RunReport] = []
    try:
        yield reports.append
    except BaseException as exc:
        beat.ping(Ping.FAIL, f"worker run raised {type(exc).__name__}")
        raise
    if not reports:
        beat.ping(Ping.SUCCESS)
        return
    report = reports[-1]
    words = [f"worker run {report.run_id}: {report.outcome.value}", f"exit {report.exit_code}"]
    summary = " ".join([*words, *report.reason_codes[:8]])
    beat.ping(Ping.FAIL if report.exit_code else Ping.SUCCESS, summary)


def last_ping(settings: Settings) -> LastPing | None:
    """The last ping's record; None when there is none (or it cannot be read)."""
    try:
        return LastPing(**json.loads(read_text(settings.state / FILE)))
    except (OSError, ValueError, TypeError):
        return None


def doctor_line(settings: Settings) -> tuple[bool, str] | None:
    """(fine, message) for `worker doctor`; None without a heartbeat URL."""
    url = settings.notify.heartbeat_url
    if not url:
        return None
    last = last_ping(settings)
    if last is None:
        return False, f"heartbeat {shown(url)}: no ping yet (the next run sends one)"
    words = f"last ping {last.kind} at {last.at}: {last.detail}"
    return last.ok, f"heartbeat {last.url}: {words}"
