"""The dashboard's pages, each read through the service its command uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from worker.errors import UsageError
from worker.web import charts, views
from worker.web.live import snapshot

if TYPE_CHECKING:
    from worker.web.app import Dashboard


def routes(dash: Dashboard) -> list[Route]:
    def page(handler: Callable[[Dashboard, Request], Response]) -> Callable[[Request], Response]:
        def serve(request: Request) -> Response:
            if not dash.may_read(request):
                return RedirectResponse("/login", status_code=303)
            return handler(dash, request)

        return serve

    return [
        Route("/", page(now_page)),
        Route("/queue", page(queue_page)),
        Route("/history", page(history_page)),
        Route("/runs/{run_id:int}", page(run_page)),
        Route("/spend", page(spend_page)),
        Route("/api/now", page(now_json)),
    ]


def now_page(dash: Dashboard, request: Request) -> Response:
    """Now: the machines, the running task (kept current by /events), the waits."""
    return dash.page(request, "now.html", now=views.overview(dash.settings), title="Now")


def now_json(dash: Dashboard, request: Request) -> Response:
    return JSONResponse(dash.scrub(snapshot(dash.settings)))


def queue_page(dash: Dashboard, request: Request) -> Response:
    return dash.page(request, "queue.html", queue=views.queue(dash.settings), title="Queue")


def history_page(dash: Dashboard, request: Request) -> Response:
    before = request.query_params.get("before")
    if before is not None and not before.isdigit():
        return dash.page(request, "refused.html", status=400, error="before: a run number")
    data = views.history(dash.settings, int(before) if before else None)
    return dash.page(request, "history.html", history=data, title="History")


def run_page(dash: Dashboard, request: Request) -> Response:
    run_id = int(request.path_params["run_id"])
    try:
        data = views.run_page(dash.settings, run_id)
    except UsageError as exc:
        return dash.page(request, "refused.html", status=404, error=str(exc))
    return dash.page(request, "run.html", detail=data, title=f"Run {run_id}")


def spend_page(dash: Dashboard, request: Request) -> Response:
    data: dict[str, Any] = views.spend(dash.settings)
    by_day = charts.bar_chart("by day (UTC)", data["days"], data["cap"])
    by_mode = charts.bar_chart("by mode", data["modes"])
    return dash.page(
        request, "spend.html", spend=data, by_day=by_day, by_mode=by_mode, title="Spend"
    )
