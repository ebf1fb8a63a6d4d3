"""Who may act through the dashboard: one operator's token, sessions kept in memory, a CSRF
token per session, and the Host names a request may carry.

Reading is allowed to whoever can reach the server on loopback where no agent's box can reach
it (worker/web/server.py; else reading needs a login too); every action needs a session opened
with the token (or the token itself as a bearer, for scripts) and, from a browser, the session's
CSRF token. The agent runs on the same machine and may reach loopback: it has no token, so it
cannot approve its own wait nor read a run.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import time
from dataclasses import dataclass, field

from worker.errors import UsageError

SESSION_COOKIE = "worker_session"
SESSION_S = 12 * 3600  # a dashboard left open all day stays logged in for a working day
MIN_TOKEN = 16  # characters: too many to guess over HTTP


@dataclass
class Session:
    name: str
    csrf: str
    expires: float
    flash: str | None = None  # the outcome of the last action, shown on the next page


@dataclass
class Auth:
    """The operator's token and name, and the sessions opened with it."""

    token: str
    name: str
    generated: bool = False  # made at start (no token set): loopback only
    sessions: dict[str, Session] = field(default_factory=dict)

    @property
    def actor(self) -> str:
        return f"web:{self.name}"

    def check_token(self, given: str | None) -> bool:
        """True for the right token (compared in constant time). Wrong guesses lock nobody
        out: the agent on this machine could otherwise keep the operator from approving."""
        return bool(given) and hmac.compare_digest((given or "").encode(), self.token.encode())

    def open_session(self) -> tuple[str, Session]:
        now = time.time()
        for old in [k for k, s in self.sessions.items() if s.expires < now]:
            del self.sessions[old]
        key = secrets.token_urlsafe(32)
        session = Session(self.name, secrets.token_urlsafe(32), time.time() + SESSION_S)
        self.sessions[key] = session
        return key, session

    def session(self, key: str | None) -> Session | None:
        found = self.sessions.get(key or "")
        if found is None:
            return None
        if found.expires < time.time():
            self.sessions.pop(key or "", None)
            return None
        return found

    def close_session(self, key: str | None) -> None:
        self.sessions.pop(key or "", None)


def csrf_ok(session: Session, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest((given or "").encode(), session.csrf.encode())


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def make_auth(host: str, token: str | None, name: str) -> Auth:
    """The dashboard's Auth; a UsageError when `host` is not loopback and no token is set.
    Without a token one is made for this start (and shown once, to the operator)."""
    if not name.strip() or any(c.isspace() for c in name):
        raise UsageError(f"--name {name!r}: give one word, e.g. your login name")
    if token is not None and len(token) < MIN_TOKEN:
        raise UsageError(f"the dashboard token is too short: use at least {MIN_TOKEN} characters")
    if token is None and not is_loopback(host):
        raise UsageError(
            f"refusing to serve the dashboard on {host}: only 127.0.0.1 (or ::1) is served "
            "without a token; set WORKER_DASHBOARD_TOKEN or --token-file to serve elsewhere"
        )
    if token is None:
        return Auth(secrets.token_urlsafe(24), name, generated=True)
    return Auth(token, name)


def allowed_hosts(host: str, port: int) -> set[str]:
    """The Host headers a loopback server answers (a page on another site that resolves its
    own name to 127.0.0.1, DNS rebinding, is refused); empty means any, behind a token."""
    if not is_loopback(host):
        return set()
    names = {"127.0.0.1", "localhost", "[::1]", host if ":" not in host else f"[{host}]"}
    return {f"{name}:{port}" for name in names} | names
