"""Serving the dashboard: the address check, the token, uvicorn in this process (or in a
thread, for the tests and the benchmark)."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from worker.config import Settings
from worker.errors import UsageError
from worker.sandbox.loopback import loopback_reachable
from worker.web.app import create_app
from worker.web.auth import Auth, allowed_hosts, is_loopback, make_auth

TOKEN_ENV = "WORKER_DASHBOARD_TOKEN"


def read_token(token_file: Path | None) -> str | None:
    """The operator's token: the first line of `token_file`, else $WORKER_DASHBOARD_TOKEN."""
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip().splitlines()
        except OSError as exc:
            raise UsageError(f"--token-file {token_file}: {exc.strerror or exc}") from exc
        if not token or not token[0].strip():
            raise UsageError(f"--token-file {token_file} is empty: write the token in it")
        return token[0].strip()
    return os.environ.get(TOKEN_ENV) or None


class _Server(uvicorn.Server):
    """uvicorn's server that also ends the live streams when told to stop: an open page
    would otherwise hold Ctrl-C up until the graceful-shutdown timeout."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: Any) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)


@dataclass
class Served:
    url: str
    auth: Auth
    server: uvicorn.Server
    private: str | None = None  # why reading needs a login too; None: open on loopback


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say they
    # are TCP; with it on, each answer on a kept-alive connection waited 40 ms for an ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(128)
    sock.setblocking(False)
    return sock


def prepare(
    settings: Settings,
    *,
    host: str,
    port: int,
    token: str | None,
    name: str,
    private: bool | None = None,
) -> tuple[Served, socket.socket]:
    """The server and its bound socket; UsageError for an address refused without a token.
    Reading needs a login too (`private`; the tests may set it) served beyond loopback, or on
    loopback where an agent could reach it: the agent has no token, so it reads no run."""
    auth = make_auth(host, token, name)
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    why = _reads_need_login(settings, host) if private is None else None
    private = why is not None if private is None else private
    app = create_app(settings, auth, allowed_hosts(host, bound), private=private)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=5,  # a request still running then is cut
    )
    server = _Server(config, app.state.dashboard.live.close)
    return Served(f"http://{shown}:{bound}", auth, server, why), sock


def _reads_need_login(settings: Settings, host: str) -> str | None:
    """Why reading the dashboard needs a login: served beyond loopback, or within an agent's
    reach (bubblewrap alone, no box, a local host allowed); None: no agent reaches it."""
    if not is_loopback(host):
        return f"it is served on {host}"
    reachable = loopback_reachable(settings)
    return None if reachable is None else f"an agent can reach loopback: {reachable}"


def serve(
    settings: Settings,
    *,
    host: str,
    port: int,
    token: str | None,
    name: str,
    on_ready: Callable[[Served], None],
) -> None:
    """Serve until interrupted (Ctrl-C, SIGTERM)."""
    served, sock = prepare(settings, host=host, port=port, token=token, name=name)
    on_ready(served)
    served.server.run(sockets=[sock])


@contextmanager
def running(
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    name: str = "op",
    private: bool | None = None,
) -> Iterator[Served]:
    """The dashboard on a free port in a thread, stopped on exit (tests, benchmarks)."""
    served, sock = prepare(settings, host=host, port=0, token=token, name=name, private=private)
    thread = threading.Thread(
        target=lambda: asyncio.run(served.server.serve(sockets=[sock])), daemon=True
    )
    thread.start()
    while not served.server.started and thread.is_alive():
        threading.Event().wait(0.02)
    try:
        yield served
    finally:
        served.server.handle_exit(0, None)
        thread.join(10)
        sock.close()
