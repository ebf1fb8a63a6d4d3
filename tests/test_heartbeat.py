"""The heartbeat (`[notify] heartbeat_url`): a local HTTP server on 127.0.0.1 stands for
healthchecks.io and records every request; real `worker run`s ping it."""

from __future__ import annotations

import json
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import FakeAgent, run_worker, state_of, write_message
from worker.operator.heartbeat import Ping, ping_url


class _Recorder(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8")
        parts = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(parts.query))
        self.server.seen.append((self.command, parts.path, query, body))  # type: ignore[attr-defined]
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def pings() -> Iterator[tuple[str, list[tuple[str, str, dict[str, str], str]]]]:
    """The ping URL of a check on a local server, and the requests it received."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/ping/check-key", server.seen  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()


def test_an_idle_run_pings_the_url_once(
    workspace: Path, pings: tuple[str, list[tuple[str, str, dict[str, str], str]]]
) -> None:
    """A run with nothing to do still says it ran: one request per run, to the URL itself
    (success), with the run's outcome in its body; nothing else is sent."""
    url, seen = pings
    env = {"WORKER_NOTIFY__HEARTBEAT_URL": url}
    assert run_worker(workspace, "run", env=env).returncode == 0
    assert run_worker(workspace, "run", env=env).returncode == 0
    assert [(m, p) for m, p, _, _ in seen] == [("POST", "/ping/check-key")] * 2
    assert "idle" in seen[0][3] and seen[0][2]["rid"] != seen[1][2]["rid"]


def test_with_heartbeat_start_a_run_pings_start_then_the_url_with_one_run_id(
    workspace: Path, pings: tuple[str, list[tuple[str, str, dict[str, str], str]]]
) -> None:
    """With `heartbeat_start`: `/start`, then the URL itself (success), both with the same
    `rid`; a second run is one more pair. Nothing else is sent."""
    url, seen = pings
    env = {"WORKER_NOTIFY__HEARTBEAT_URL": url, "WORKER_NOTIFY__HEARTBEAT_START": "true"}
    assert run_worker(workspace, "run", env=env).returncode == 0
    assert [(m, p) for m, p, _, _ in seen] == [
        ("POST", "/ping/check-key/start"),
        ("POST", "/ping/check-key"),
    ]
    assert seen[0][2]["rid"] == seen[1][2]["rid"]
    assert "idle" in seen[1][3]
    assert run_worker(workspace, "run", env=env).returncode == 0
    assert [p for _, p, _, _ in seen[2:]] == ["/ping/check-key/start", "/ping/check-key"]
    assert seen[2][2]["rid"] != seen[0][2]["rid"]


def test_a_failed_task_pings_fail_and_a_dry_run_pings_nothing(
    workspace: Path,
    fake_claude: FakeAgent,
    pings: tuple[str, list[tuple[str, str, dict[str, str], str]]],
) -> None:
    """The task fails (exit 1): the run's end is `/fail`, with the outcome in the body. A dry
    run, which changes nothing, sends nothing."""
    url, seen = pings
    env = {"WORKER_NOTIFY__HEARTBEAT_URL": url}
    write_message(workspace, "msg-1")
    assert run_worker(workspace, "run", "--dry-run", env=env).returncode == 0
    assert seen == []
    fake_claude.answers({"status": "failure", "reason": "cannot be done"})
    assert run_worker(workspace, "run", env=env).returncode == 1
    assert [p for _, p, _, _ in seen] == ["/ping/check-key/fail"]
    assert "failure" in seen[0][3] and "exit 1" in seen[0][3]


def test_doctor_shows_the_last_ping_and_an_unreachable_url_never_fails_the_run(
    workspace: Path, pings: tuple[str, list[tuple[str, str, dict[str, str], str]]]
) -> None:
    """`doctor` shows the last ping (kind, time, answer) without the URL's key; a URL where
    nothing listens leaves the run's outcome as it was (exit 0), the failure logged and
    shown by doctor as a warning."""
    url, _seen = pings
    assert run_worker(workspace, "run", env={"WORKER_NOTIFY__HEARTBEAT_URL": url}).returncode == 0
    report = json.loads(
        run_worker(workspace, "doctor", "--json", env={"WORKER_NOTIFY__HEARTBEAT_URL": url}).stdout
    )
    (beat,) = [f for f in report["findings"] if f["check"] == "heartbeat"]
    assert beat["status"] == "ok" and "last ping success" in beat["message"]
    assert "HTTP 200" in beat["message"] and "check-key" not in beat["message"]

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}/ping/secret-key"
    env = {"WORKER_NOTIFY__HEARTBEAT_URL": dead}
    done = run_worker(workspace, "run", env=env)
    assert done.returncode == 0
    assert "heartbeat success to http://127.0.0.1/… failed" in done.stderr
    assert "secret-key" not in done.stderr
    report = json.loads(run_worker(workspace, "doctor", "--json", env=env).stdout)
    (beat,) = [f for f in report["findings"] if f["check"] == "heartbeat"]
    assert beat["status"] == "warn" and "Connection refused" in beat["message"]
    assert "secret-key" not in (state_of(workspace) / "heartbeat.json").read_text("utf-8")


def test_the_ping_urls_follow_healthchecks_convention() -> None:
    """`/start` and `/fail` are added to the path, success is the URL itself, and a query
    the URL already has (Cronitor's) is kept beside the run id."""
    assert (
        ping_url("https://hc-ping.com/k/", Ping.START, "r") == "https://hc-ping.com/k/start?rid=r"
    )
    assert ping_url("https://hc-ping.com/k", Ping.SUCCESS, "r") == "https://hc-ping.com/k?rid=r"
    assert ping_url("https://x.io/p/k?state=run", Ping.FAIL, "r") == (
        "https://x.io/p/k/fail?state=run&rid=r"
    )
