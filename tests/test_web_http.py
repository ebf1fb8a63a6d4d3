"""`worker dashboard` at the HTTP level, on a real server on 127.0.0.1: who may act (token,
session, CSRF, Host), that every action goes through the command's service in the actor's
name and refuses unknown ids, the pages read from the store, and that no secret is rendered."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import TOKENS, run_worker, save_approval_wait, write_message
from tests.web_support import (
    TOKEN,
    claude_lines,
    client,
    close_clients,
    dashboard,
    logged_in,
    record_run,
)
from worker.config import load_settings
from worker.errors import ExitCode
from worker.kernel.control import control_dir
from worker.state.store import Store
from worker.waits import intercom
from worker.web.auth import make_auth
from worker.web.live import Broadcaster, read_running

pytestmark = pytest.mark.usefixtures("only_the_task")


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    close_clients()


def _waiting(ws: Path, task_id: str = "msg-w", **fields: object) -> Path:
    write_message(ws, task_id)
    settings = load_settings(ws)
    with Store(settings.db_path) as store:
        return save_approval_wait(
            settings, store, task_id, **{"waitFor": "May I drop the table?", **fields}
        )


def _notes(ws: Path, task_id: str = "msg-w") -> list[dict[str, object]]:
    folder = intercom.root(load_settings(ws)) / task_id
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def _orders(ws: Path) -> list[dict[str, object]]:
    folder = control_dir(load_settings(ws))
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def test_another_address_is_refused_without_a_token(workspace: Path) -> None:
    """0.0.0.0 (or any address that is not loopback) is refused when no token is set; with a
    token it is allowed. A short token is refused everywhere."""
    result = run_worker(workspace, "dashboard", "--host", "0.0.0.0", "--port", "0")
    assert result.returncode == ExitCode.USAGE
    assert "refusing to serve the dashboard on 0.0.0.0" in result.stderr
    assert make_auth("0.0.0.0", TOKEN, "alice").token == TOKEN
    with pytest.raises(Exception, match="too short"):
        make_auth("127.0.0.1", "short", "alice")
    assert make_auth("::1", None, "alice").generated


def test_a_request_for_another_host_name_changes_nothing(workspace: Path) -> None:
    """A page of another site whose name resolves to 127.0.0.1 (DNS rebinding) gets 400, even
    with the token; nothing is written."""
    _waiting(workspace)
    with dashboard(workspace) as served:
        answer = client(served).post(
            "/actions/approve",
            data={"task": "msg-w"},
            headers={"Host": "attacker.example", "Authorization": f"Bearer {TOKEN}"},
        )
    assert answer.status_code == 400
    assert _notes(workspace) == []


def test_actions_without_authentication_change_nothing_even_on_loopback(workspace: Path) -> None:
    """No session, a wrong token, a session without its CSRF token, or a form posted from
    another origin: each is refused and no note or order is written."""
    _waiting(workspace)
    with dashboard(workspace) as served:
        anonymous = client(served)
        assert anonymous.post("/actions/approve", data={"task": "msg-w"}).status_code == 401
        assert anonymous.post("/actions/cancel", data={"task": "msg-w"}).status_code == 401
        wrong = {"Authorization": "Bearer wrong-token-0123456789"}
        assert (
            anonymous.post("/actions/approve", data={"task": "msg-w"}, headers=wrong).status_code
            == 401
        )
        assert anonymous.post("/login", data={"token": "nope"}).status_code == 401
        http, csrf = logged_in(served)
        assert http.post("/actions/approve", data={"task": "msg-w"}).status_code == 403
        forged = {"task": "msg-w", "csrf": csrf + "x"}
        assert http.post("/actions/approve", data=forged).status_code == 403
        other_site = {"Origin": "http://evil.example"}
        posted = http.post(
            "/actions/approve", data={"task": "msg-w", "csrf": csrf}, headers=other_site
        )
        assert posted.status_code == 403
    assert _notes(workspace) == [] and _orders(workspace) == []
    assert (workspace / "wait_states" / "msg-w.json").exists()


def test_approve_from_a_session_is_noted_in_the_approvers_name(workspace: Path) -> None:
    """A logged-in form with its CSRF token approves through `worker waits approve`'s
    service: the note carries the text and `web:alice`, the wait's log says who."""
    _waiting(workspace)
    with dashboard(workspace) as served:
        http, csrf = logged_in(served)
        answer = http.post(
            "/actions/approve", data={"task": "msg-w", "note": "yes, drop it", "csrf": csrf}
        )
        assert answer.status_code == 303
        page = http.get("/").text
    assert "approval of msg-w noted" in page
    [note] = _notes(workspace)
    assert note["kind"] == "approval" and note["by"] == "web:alice"
    assert note["text"] == "yes, drop it"
    settings = load_settings(workspace)
    with Store(settings.db_path) as store:
        codes = [r[0] for r in store.db.execute("SELECT detail FROM wait_log")]
    assert "approval by web:alice" in codes


def test_reject_and_cancel_with_the_token_as_a_bearer(workspace: Path) -> None:
    """A script with the token (no cookie, no CSRF) rejects and cancels; the cancel order is
    the one `worker cancel` writes, sent by web:alice."""
    _waiting(workspace)
    with dashboard(workspace) as served:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        http = client(served)
        reject = http.post("/actions/reject", data={"task": "msg-w", "note": "no"}, headers=bearer)
        cancel = http.post(
            "/actions/cancel", data={"task": "msg-w", "reason": "obsolete"}, headers=bearer
        )
    assert reject.status_code == 200 and reject.json()["kind"] == "rejection"
    assert reject.json()["by"] == "web:alice"
    assert cancel.status_code == 200, cancel.text
    [order] = _orders(workspace)
    assert order["action"] == "cancel" and order["task"] == "msg-w"
    assert order["from"] == "web:alice" and order["reason"] == "obsolete"


def test_unknown_ids_are_refused_and_nothing_is_written(workspace: Path) -> None:
    _waiting(workspace)
    with dashboard(workspace) as served:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        http = client(served)
        approve = http.post("/actions/approve", data={"task": "msg-nope"}, headers=bearer)
        cancel = http.post("/actions/cancel", data={"task": "msg-nope"}, headers=bearer)
        every = http.post("/actions/cancel", data={"task": "*"}, headers=bearer)
        other = http.post("/actions/delete", data={"task": "msg-w"}, headers=bearer)
    assert approve.status_code == 404 and "no wait state 'msg-nope'" in approve.json()["error"]
    assert cancel.status_code == 404 and "no task 'msg-nope'" in cancel.json()["error"]
    assert "--force" not in cancel.json()["error"]  # the page has no such option
    assert every.status_code == 400 and other.status_code == 400
    assert _notes(workspace) == [] and _orders(workspace) == []


def test_the_waits_allow_list_holds_for_the_dashboard_too(workspace: Path) -> None:
    """A wait that names its approvers is approved only by one of them, `web:<name>` being
    the dashboard's name for its operator."""
    _waiting(workspace, approvers=["bob"])
    with dashboard(workspace) as served:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        refused = client(served).post("/actions/approve", data={"task": "msg-w"}, headers=bearer)
    assert refused.status_code == 400 and "not an allowed approver" in refused.json()["error"]
    assert _notes(workspace) == []
    _waiting(workspace, "msg-b", approvers=["web:bob"])
    with dashboard(workspace, name="bob") as served:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        ok = client(served).post("/actions/approve", data={"task": "msg-b"}, headers=bearer)
    assert ok.status_code == 200 and _notes(workspace, "msg-b")[0]["by"] == "web:bob"


def test_no_secret_is_rendered(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets in a wait's question, a run's reason and a transcript (the environment's
    tokens, the dashboard's own token, `password=...`) are hidden on every page."""
    for name, value in TOKENS.items():
        monkeypatch.setenv(name, value)
    leaky = f"use {TOKENS['GITHUB_TOKEN']} and {TOKEN}"
    _waiting(workspace, waitFor=f"May I push with {TOKENS['GH_TOKEN']}? {TOKEN}")
    settings = load_settings(workspace)
    lines = claude_lines(f"done {TOKENS['WORKER_GIT_TOKEN']}", f"curl password=hunter22 {TOKEN}")
    run_id = record_run(settings, "msg-r", reason=leaky, transcript=lines)
    with dashboard(workspace) as served:
        http, _ = logged_in(served)
        pages = [http.get(p).text for p in ("/", "/history", f"/runs/{run_id}", "/api/now")]
    text = "\n".join(pages)
    assert "Bash: curl password=***" in text and "May I push with" in text
    for secret in [*TOKENS.values(), TOKEN, "hunter22"]:
        assert secret not in text


def test_pages_read_the_store_as_the_commands_do(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """History pages back through the runs; a run's page has its iteration, STATUS line,
    tools, files and transcript; the queue lists the inbox as `worker queue`; spend draws
    the daily cap."""
    monkeypatch.setenv("WORKER_DAILY_COST_CAP_USD", "5")
    settings = load_settings(workspace)
    ids = [record_run(settings, f"msg-{n}", cost=0.5) for n in range(60)]
    ids.append(record_run(settings, "msg-last", transcript=claude_lines("All done.", "pytest -q")))
    write_message(workspace, "msg-q1", subject="Fix the login")
    with dashboard(workspace) as served:
        http = client(served)
        first = http.get("/history").text
        older = re.search(r'href="/history\?before=(\d+)"', first)
        assert older, "no link to older runs"
        second = http.get(f"/history?before={older.group(1)}").text
        run = http.get(f"/runs/{ids[-1]}").text
        missing = http.get("/runs/99999")
        queue = http.get("/queue").text
        spend = http.get("/spend").text
        bad = http.get("/history?before=x")
    assert "msg-last" in first and "msg-0<" not in first.replace(" ", "<")
    assert "msg-0 " in second or "msg-0<" in second
    assert "STATUS: COMPLETE" in run and "src/app.py" in run and "Write ×1" in run
    assert "Bash: pytest -q" in run and "All done." in run
    assert missing.status_code == 404 and "no run 99999" in missing.text
    assert "msg-q1" in queue and "Fix the login" in queue
    assert 'id="cap-line"' in spend and "daily cap $5.0000" in spend and "code-simple" in spend
    assert bad.status_code == 400


def test_the_live_stream_gives_the_running_task_and_one_read_serves_every_page(
    workspace: Path,
) -> None:
    """/events sends the running task (from its heartbeat); twenty open streams read the
    store as often as one does."""
    settings = load_settings(workspace)
    with Store(settings.db_path) as store:
        from worker.state.progress import ensure

        ensure(store)
        run_id = store.start_run(settings.machine_id, __import__("os").getpid())
        store.db.execute(
            "INSERT INTO run_progress(run_id, task_id, title, mode, iteration, max_iterations,"
            " started_at, updated_at, cost_usd, tool) VALUES (?, 'msg-run', 'Build it',"
            " 'code-simple', 2, 5, ?, ?, 0.12, 'Bash: make')",
            (run_id, time.time(), time.time()),
        )
    assert read_running(settings)[0]["tool"] == "Bash: make"
    with (
        dashboard(workspace) as served,
        httpx.Client(base_url=served.url, timeout=60) as http,
        http.stream("GET", "/events") as stream,
    ):
        lines = stream.iter_lines()
        assert next(lines) == "event: now"
        data = json.loads(next(lines).removeprefix("data: "))
    assert data["running"][0]["task_id"] == "msg-run"
    assert data["running"][0]["iteration"] == 2 and data["waiting"] == 0


def test_twenty_listeners_share_one_poller() -> None:
    import asyncio

    reads = []

    def read() -> dict[str, object]:
        reads.append(1)
        return {"n": len(reads)}

    async def listen(live: Broadcaster, count: int) -> int:
        streams = [live.stream() for _ in range(count)]
        got = await asyncio.gather(*(s.__anext__() for s in streams))
        await asyncio.sleep(2.5)
        for s in streams:
            await s.aclose()
        assert all(g.startswith("event: now") for g in got)
        return live.reads

    one = asyncio.run(listen(Broadcaster(read, lambda v: v), 1))
    twenty = asyncio.run(listen(Broadcaster(read, lambda v: v), 20))
    assert twenty <= one + 1


def test_wrong_tokens_lock_nobody_out_and_only_approval_waits_offer_approve(
    workspace: Path,
) -> None:
    """Many wrong tokens (an agent guessing) do not keep the operator from logging in; a wait
    for a moment offers Cancel but not Approve (as `worker waits approve` refuses it)."""
    _waiting(workspace, "msg-t", resumeWhen="time", resumeAt="2100-01-01T00:00:00+00:00")
    with dashboard(workspace) as served:
        http = client(served)
        for _ in range(30):
            assert http.post("/login", data={"token": "x" * 20}).status_code == 401
        http, _csrf = logged_in(served)
        page = http.get("/").text
    wait = page.split('data-task="msg-t"')[1].split("</article>")[0]
    assert "Cancel task" in wait and "Approve" not in wait


def test_the_spend_chart_scales_to_the_cap_and_names_days_and_modes() -> None:
    from worker.web.charts import HEIGHT, PAD, bar_chart

    rows = [{"key": "2026-11-22", "usd": 1.0}, {"key": "2026-11-23", "usd": 2.0}]
    chart = bar_chart("by day", rows, cap=4.0)
    assert [b.label for b in chart.bars] == ["11-22", "11-23"]
    assert chart.bars[1].h == pytest.approx(2 * chart.bars[0].h)
    assert chart.cap_y == pytest.approx(PAD)  # the cap is the top of the chart
    assert chart.bars[1].y == pytest.approx((HEIGHT - PAD + PAD) / 2)  # half the cap's height
    modes = bar_chart("by mode", [{"key": "code-complex-with-a-long-name", "usd": 3.0}])
    assert modes.bars[0].label == "code-complex-wi…" and modes.cap_y is None


def test_stopping_the_server_ends_the_open_live_views(workspace: Path) -> None:
    """A page left open does not hold the server up when it stops: its stream ends, cleanly;
    the loopback names (127.0.0.1, localhost) are answered."""
    import threading

    ended: list[str] = []

    def follow(url: str) -> None:
        with httpx.stream("GET", f"{url}/events", timeout=None) as stream:
            for _line in stream.iter_lines():
                pass
        ended.append("clean")

    with dashboard(workspace) as served:
        port = served.url.rsplit(":", 1)[1]
        by_name = client(served).get("/", headers={"Host": f"localhost:{port}"})
        assert by_name.status_code == 200
        viewer = threading.Thread(target=follow, args=(served.url,))
        viewer.start()
        while served.server.config.app.state.dashboard.live.listeners == 0:
            time.sleep(0.05)
    viewer.join(30)
    assert ended == ["clean"]


def test_an_unreachable_fleet_database_is_said_in_words_without_its_password(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the fleet database down, the front page still shows (the machines row says why)
    and the history answers 503 in words; the URL's password is shown nowhere."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once the socket is closed
    monkeypatch.setenv(
        "WORKER_FLEET__DATABASE_URL", f"postgresql://op:pw-9f8e7d@127.0.0.1:{port}/x"
    )
    with dashboard(workspace) as served:
        http = client(served)
        now = http.get("/")
        history = http.get("/history")
    assert now.status_code == 200 and "test-machine" in now.text
    assert history.status_code == 503 and "fleet database" in history.text.lower()
    assert "pw-9f8e7d" not in now.text + history.text


def test_the_command_serves_prints_a_token_once_and_stops_on_sigterm(workspace: Path) -> None:
    """`worker dashboard` (the real command) with no token set makes one, prints the login
    line once, answers with it, and ends on SIGTERM; the token reaches no log file."""
    import signal
    import subprocess
    import sys

    argv = [sys.executable, "-m", "worker", "dashboard", "--port", "0", "--name", "carol"]
    proc = subprocess.Popen(
        [*argv, "--workspace", str(workspace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first, second = proc.stdout.readline(), proc.stdout.readline()  # type: ignore[union-attr]
        url = first.split()[2]
        token = second.rsplit(" ", 1)[1].strip()
        assert "actions as web:carol" in first and url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=url, timeout=60) as http:
            assert http.post("/login", data={"token": token}).status_code == 303
            assert http.post("/login", data={"token": token[:-1]}).status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert token not in out + err
    logs = load_settings(workspace).logs
    for path in logs.rglob("*") if logs.exists() else []:
        assert path.is_dir() or token not in path.read_text(errors="replace")


def test_without_the_web_extra_the_command_says_what_to_install(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from typer.testing import CliRunner

    from worker.cli.app import app

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if `worker[web]` were not installed
    monkeypatch.delitem(sys.modules, "worker.web.server", raising=False)
    result = CliRunner().invoke(app, ["dashboard", "--workspace", str(workspace)])
    assert result.exit_code != 0
    assert "pip install 'worker[web]'" in str(result.exception)


def test_served_beyond_loopback_reading_needs_a_login_too(workspace: Path) -> None:
    """On an address other hosts reach (here the same switch on loopback), every page and
    the live stream need the token; the login page and the static files do not."""
    _waiting(workspace)
    with dashboard(workspace, private=True) as served:
        http = client(served)
        assert http.get("/").status_code == 303 and http.get("/api/now").status_code == 303
        assert http.get("/events").status_code == 401
        assert http.get("/login").status_code == 200
        assert http.get("/static/dashboard.css").status_code == 200
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert http.get("/api/now", headers=bearer).status_code == 200
        logged, _ = logged_in(served)
        assert "May I drop the table?" in logged.get("/").text
    with dashboard(workspace) as served:  # on loopback, reading is open
        assert client(served).get("/").status_code == 200


def test_the_listening_socket_says_it_is_tcp_so_answers_are_not_held_by_nagle(
    workspace: Path,
) -> None:
    """asyncio turns Nagle's algorithm off only on sockets whose protocol is TCP; without it
    every answer on a kept-alive connection (a browser's) waited for a delayed ACK (40 ms)."""
    import socket

    from worker.web.server import prepare

    _served, sock = prepare(
        load_settings(workspace), host="127.0.0.1", port=0, token=TOKEN, name="alice"
    )
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


def test_the_dashboard_token_is_no_setting_and_never_reaches_a_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`WORKER_DASHBOARD_TOKEN` is documented: no "not a setting" warning for it, and no
    process worker starts (the agent above all) inherits it."""
    from worker.config import load_settings
    from worker.process.proc import child_env

    monkeypatch.setenv("WORKER_DASHBOARD_TOKEN", "dashboard-token-0123456789abcdef")
    assert [p for p in load_settings(tmp_path).problems if "DASHBOARD" in str(p)] == []
    env = child_env()
    assert "WORKER_DASHBOARD_TOKEN" not in env
    assert "dashboard-token-0123456789abcdef" not in env.values()
