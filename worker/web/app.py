"""The dashboard's ASGI application: pages, the live stream, login, and the actions.

Pages render on the server (readable without JavaScript); a small script of our own, shipped in
the package, keeps the running task current from `/events`. Every response forbids framing and
scripts from elsewhere; a loopback server answers only its own Host names."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from worker.config import Settings
from worker.errors import UsageError, WorkerError
from worker.humanize import duration, moment
from worker.web import actions, pages, views
from worker.web.auth import SESSION_COOKIE, SESSION_S, Auth, Session, csrf_ok
from worker.web.live import Broadcaster, snapshot

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # "no-referrer" makes a form's Origin "null"
    "Cache-Control": "no-store",
}


@dataclass
class Dashboard:
    """What every request needs: the settings, the operator's Auth, the page renderer."""

    settings: Settings
    auth: Auth
    env: Environment
    live: Broadcaster
    private: bool = False  # reading needs a login too (served beyond loopback)

    def may_read(self, request: Request) -> bool:
        if not self.private:
            return True
        if self.auth.session(request.cookies.get(SESSION_COOKIE)) is not None:
            return True
        return self.auth.check_token(_bearer(request))

    def scrub(self, value: Any) -> Any:
        return self.live.scrub(value)

    def page(self, request: Request, name: str, status: int = 200, **data: Any) -> HTMLResponse:
        session = self.auth.session(request.cookies.get(SESSION_COOKIE))
        flash = session_flash(session)
        html = self.env.get_template(name).render(
            **self.scrub(data), session=session, flash=flash, machine=self.settings.machine_id,
            fleet=self.settings.fleet.enabled,
        )  # fmt: skip
        return HTMLResponse(html, status_code=status)


def session_flash(session: Session | None) -> str | None:
    """The outcome of the session's last action, shown once on the next page."""
    if session is None:
        return None
    flash, session.flash = session.flash, None
    return flash


def _templates() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True)
    env.filters["duration"] = duration
    env.filters["moment"] = moment
    env.filters["usd"] = lambda value: f"${(value or 0.0):.4f}"
    return env


class _SecurityHeaders:
    """Headers on every response; with `hosts`, a request for another Host name gets 400
    (the whole Host header is compared: an IPv6 address has colons of its own)."""

    def __init__(self, app: ASGIApp, hosts: set[str] | None = None) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.hosts and scope["type"] == "http":
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1").lower()
            if host not in self.hosts:
                refused = PlainTextResponse("unknown Host", status_code=400)
                await refused(scope, receive, send)
                return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = message.setdefault("headers", [])
                headers.extend((k.lower().encode(), v.encode()) for k, v in _HEADERS.items())
            await send(message)

        await self.app(scope, receive, with_headers if scope["type"] == "http" else send)


def create_app(
    settings: Settings, auth: Auth, hosts: set[str] | None = None, private: bool = False
) -> Starlette:
    """The dashboard for `settings`; `hosts` are the Host names answered (None: any);
    `private`: every page needs a login, not only the actions."""
    scrub = views.scrubber((auth.token,))
    live = Broadcaster(lambda: snapshot(settings), scrub)
    dash = Dashboard(settings, auth, _templates(), live, private)
    routes = [
        *pages.routes(dash),
        Route("/login", partial(login, dash), methods=["GET", "POST"]),
        Route("/logout", partial(logout, dash), methods=["POST"]),
        Route("/actions/{name}", partial(act, dash), methods=["POST"]),
        Route("/events", partial(events, dash)),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(_SecurityHeaders, hosts=hosts)],
        exception_handlers={WorkerError: partial(_failed, dash)},
    )
    app.state.dashboard = dash
    return app


async def events(dash: Dashboard, request: Request) -> Response:
    if not dash.may_read(request):
        return JSONResponse({"error": "log in first"}, status_code=401)
    return StreamingResponse(dash.live.stream(), media_type="text/event-stream")


async def login(dash: Dashboard, request: Request) -> Response:
    if request.method == "GET":
        return dash.page(request, "login.html")
    form = await request.form()
    token = form.get("token")
    if not isinstance(token, str) or not dash.auth.check_token(token):
        return dash.page(request, "login.html", status=401, error="wrong token")
    key, _session = dash.auth.open_session()
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        SESSION_COOKIE, key, max_age=SESSION_S, httponly=True, samesite="strict", path="/"
    )
    return response


async def logout(dash: Dashboard, request: Request) -> Response:
    key = request.cookies.get(SESSION_COOKIE)
    session = dash.auth.session(key)
    form = await request.form()
    if session is not None and csrf_ok(session, _text(form.get("csrf"))):
        dash.auth.close_session(key)
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


def _failed(dash: Dashboard, request: Request, exc: Exception) -> Response:
    """A store or database that cannot be read: said in words (503), the page still served."""
    log.debug("dashboard: %s failed", request.url.path, exc_info=True)
    if _bearer(request) is not None or "json" in request.headers.get("accept", ""):
        return JSONResponse(dash.scrub({"error": str(exc)}), status_code=503)
    return dash.page(request, "refused.html", status=503, error=str(exc))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    return header[7:].strip() if header.lower().startswith("bearer ") else None


async def act(dash: Dashboard, request: Request) -> Response:
    """POST /actions/approve|reject|cancel with `task` (and `note` or `reason`): allowed with
    the token as a bearer (a script), or a session and its CSRF token (a browser's form)."""
    form = await request.form()
    bearer = _bearer(request)
    session = dash.auth.session(request.cookies.get(SESSION_COOKIE))
    if bearer is not None:
        if not dash.auth.check_token(bearer):
            return JSONResponse({"error": "wrong token"}, status_code=401)
    elif session is None:
        return _refused(dash, request, 401, "log in with the dashboard's token first")
    elif not csrf_ok(session, _text(form.get("csrf"))) or not _same_origin(request):
        return _refused(dash, request, 403, "the form is stale or from another site")
    name = request.path_params["name"]
    task = _text(form.get("task"))
    try:
        result = await _do(dash, name, task, form)
    except actions.UnknownTask as exc:
        return _answer(dash, request, session, bearer, 404, {"error": str(exc)})
    except UsageError as exc:
        return _answer(dash, request, session, bearer, 400, {"error": str(exc)})
    return _answer(dash, request, session, bearer, 200, result)


async def _do(dash: Dashboard, name: str, task: str, form: Any) -> dict[str, Any]:
    actor, settings = dash.auth.actor, dash.settings
    if name in ("approve", "reject"):
        note = _text(form.get("note"))
        return await run_in_threadpool(
            actions.decide, settings, task, name == "approve", note, actor
        )
    if name == "cancel":
        reason = _text(form.get("reason"))
        return await run_in_threadpool(actions.cancel, settings, task, reason, actor)
    raise UsageError(f"no action {name!r}: approve, reject or cancel")


def _same_origin(request: Request) -> bool:
    """A browser's Origin (when it sends one) is this server's own."""
    origin = request.headers.get("origin")
    return origin is None or origin.split("://", 1)[-1] == request.headers.get("host")


def _refused(dash: Dashboard, request: Request, status: int, why: str) -> Response:
    if _bearer(request) is not None or "json" in request.headers.get("accept", ""):
        return JSONResponse({"error": why}, status_code=status)
    return dash.page(request, "refused.html", status=status, error=why)


def _answer(
    dash: Dashboard,
    request: Request,
    session: Session | None,
    bearer: str | None,
    status: int,
    data: dict[str, Any],
) -> Response:
    if bearer is not None:
        return JSONResponse(dash.scrub(data), status_code=status)
    if session is not None:
        session.flash = data.get("error") or _done(data)
    return RedirectResponse("/", status_code=303)


def _done(data: dict[str, Any]) -> str:
    if "kind" in data:
        return f"{data['kind']} of {data['task_id']} noted; the next run resumes it"
    return f"cancel order for {data['task']} written; a running worker obeys it within seconds"
