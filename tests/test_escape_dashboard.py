"""The dashboard refuses reads from the box (issue 38, point 5's dashboard bullet).

Bubblewrap alone leaves the network open: a process in the box reaches 127.0.0.1, where the
dashboard serves every run's transcript. The choice: on loopback, reading needs a login too
unless every task's box limits the network to hosts that are not local (srt without a local
host allowed). The agent has no token (it is never in its environment and its files are out
of its reach), so it reads nothing; the operator logs in with the token `worker dashboard`
shows once, and reads as before. With srt the box cannot reach loopback at all, and the
dashboard stays open to the operator's browser without a login.

The stand-in agent (a `command` mode) fetches a finished run's page from inside its box and
writes what it got into its tree; the test looks for the transcript's marker there."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.sandbox_support import sandbox_runtime
from tests.test_sandbox import STATUS, bwrap_works, command_mode
from tests.web_support import claude_lines, close_clients, record_run
from worker.config import load_settings
from worker.run.runner import RunOptions, run_once
from worker.sandbox.loopback import loopback_reachable
from worker.web.server import Served, running

from .conftest import needs_posix, write_message

pytestmark = needs_posix("bubblewrap and srt")
MARKER = "TRANSCRIPT-ONLY-FOR-THE-OPERATOR-5d2b"
FETCH = """import sys, urllib.request
try:
    body = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
except Exception as exc:
    body = f"refused: {exc!r}"
open("got.txt", "w").write(body)
"""


@pytest.fixture(autouse=True)
def _clients() -> Iterator[None]:
    yield
    close_clients()


@pytest.fixture
def boxed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workspace: Path) -> Path:
    """The default box settings (not the suite's `off`), a home, a finished run whose
    transcript holds the marker (run 1), and the fetching agent's script in the tree."""
    monkeypatch.delenv("WORKER_SANDBOX__MODE")
    monkeypatch.delenv("WORKER_SANDBOX__UNTRUSTED_MODE")
    monkeypatch.setenv("WORKER_FALLBACK__ENABLED", "false")
    monkeypatch.setenv("WORKER_REVIEW__ENABLED", "false")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    record_run(load_settings(workspace), "msg-old", transcript=claude_lines(MARKER, "make"))
    (workspace / "fetch.py").write_text(FETCH)
    return workspace


def use(runtime: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if runtime == "bwrap":
        bwrap_works()
        monkeypatch.setenv("WORKER_SANDBOX__SRT_BIN", str(tmp_path / "no-srt"))
    else:
        monkeypatch.setenv("WORKER_SANDBOX__SRT_BIN", str(sandbox_runtime()))


def agent_fetches(workspace: Path, served: Served) -> str:
    """The agent, in its box, reads run 1's page from the dashboard: what it got."""
    command_mode(workspace, f"{sys.executable} fetch.py {served.url}/runs/1; " + STATUS)
    write_message(workspace, "msg-attack")
    report = run_once(load_settings(workspace), RunOptions())
    assert report.outcome.value == "success", report.reason
    return (workspace / "got.txt").read_text()


def test_with_bubblewrap_alone_the_box_reads_no_transcript_and_the_operator_does(
    boxed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bubblewrap alone: reading needs a login, and the dashboard says why; the agent in the
    box gets the login page, the operator's browser logs in with the token and reads."""
    use("bwrap", tmp_path, monkeypatch)
    with running(load_settings(boxed)) as served:
        assert served.private is not None and "bubblewrap alone" in served.private
        got = agent_fetches(boxed, served)
        stranger = httpx.get(f"{served.url}/runs/1", timeout=30)
        browser = httpx.Client(base_url=served.url, timeout=30)
        login = browser.post("/login", data={"token": served.auth.token})
        page = browser.get("/runs/1").text
        browser.close()
    assert MARKER not in got and "token" in got  # the login page, not the run
    assert stranger.status_code == 303 and stranger.headers["location"] == "/login"
    assert login.status_code == 303 and MARKER in page


def test_the_control_an_open_dashboard_is_read_from_inside_bubblewrap(
    boxed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same agent against a dashboard that reads without a login (as before): it gets the
    transcript, so the test above can fail."""
    use("bwrap", tmp_path, monkeypatch)
    with running(load_settings(boxed), private=False) as served:
        assert MARKER in agent_fetches(boxed, served)


def test_with_srt_the_box_cannot_reach_loopback_and_the_browser_reads_freely(
    boxed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """srt for every task and no local host allowed: the dashboard reads without a login on
    loopback, and the agent in the box still gets nothing (its network reaches no loopback)."""
    use("srt", tmp_path, monkeypatch)
    with running(load_settings(boxed)) as served:
        assert served.private is None
        got = agent_fetches(boxed, served)
        page = httpx.get(f"{served.url}/runs/1", timeout=30).text
    assert MARKER not in got and got.startswith("refused: ")
    assert MARKER in page


def test_loopback_is_within_reach_without_a_box_or_with_a_local_host_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    """No box (the suite's `off`): reachable. srt with a local model API or a local host in
    `allow_hosts`: reachable too, for its proxy lets that host through."""
    settings = load_settings(workspace)
    assert "without a sandbox" in (loopback_reachable(settings) or "")
    srt = str(sandbox_runtime())
    boxed = settings.with_sections(
        sandbox=settings.sandbox.model_copy(
            update={"mode": "auto", "untrusted_mode": "auto", "srt_bin": srt}
        )
    )
    assert loopback_reachable(boxed, {"HOME": str(tmp_path)}) is None
    local_api = {"HOME": str(tmp_path), "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/"}
    assert "127.0.0.1:9" in (loopback_reachable(boxed, local_api) or "")
    allowed = boxed.with_sections(
        sandbox=boxed.sandbox.model_copy(update={"allow_hosts": ["localhost:8765"]})
    )
    assert "localhost:8765" in (loopback_reachable(allowed, {"HOME": str(tmp_path)}) or "")
