"""`worker dashboard` in a real browser: Debian's Chromium driven by Playwright. A task runs
(the real `worker run` with the fake `claude`) while another waits; the page shows both, the
running one updates without a reload, Approve with a note resumes the wait at the next run in
the approver's name, an action without authentication is refused, and the page's screenshot
is a real picture. Where no browser is installed the tests skip, except when
WEB_BROWSER_REQUIRED is set (CI), where they fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FakeAgent, save_approval_wait, write_message
from tests.web_support import TOKEN, dashboard
from worker.config import load_settings
from worker.run.runner import RunOptions, run_once
from worker.state.store import Store
from worker.waits import intercom

pytestmark = pytest.mark.usefixtures("only_the_task")

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 60_000  # how long the page may take to show a change (a loaded CI machine)


def _missing(reason: str) -> None:
    if os.environ.get("WEB_BROWSER_REQUIRED"):  # CI: these tests must run
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium (never a browser Playwright downloads), headless."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed: pip install -e '.[test]'")
    path = shutil.which("chromium") or CHROMIUM
    if not os.path.exists(path):
        _missing("no Chromium: apt-get install -y chromium")
    with sync_playwright() as play:
        launched = play.chromium.launch(executable_path=path, args=FLAGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    yield opened
    context.close()


def _log_in(page: Any, url: str) -> None:
    page.goto(f"{url}/login")
    page.fill("input[name=token]", TOKEN)
    page.click("form[action='/login'] button")
    page.wait_for_url(f"{url}/")


def _start_run(ws: Path) -> subprocess.Popen[str]:
    """The real `worker run` in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "worker", "run", "--workspace", str(ws)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_running_and_waiting_shown_live_and_approve_resumes_in_the_approvers_name(
    workspace: Path, fake_claude: FakeAgent, page: Any, tmp_path: Path
) -> None:
    fake_claude.answers(
        {"status": "wait", "reason": "destructive", "wait_for": "May I drop the old table?",
         "resume_when": "user_approval"},
        {"status": "continue", "reason": "step one", "hang": 3},
        {"status": "continue", "reason": "step two", "hang": 3},
        {"status": "success", "reason": "built", "hang": 1},
        {"status": "success", "reason": "dropped it"},
    )  # fmt: skip
    write_message(workspace, "msg-w", subject="Clean the database")
    assert run_once(load_settings(workspace), RunOptions()).outcome.value == "waiting"
    write_message(workspace, "msg-r", subject="Build the thing")
    with dashboard(workspace) as served:
        _log_in(page, served.url)
        page.evaluate("window.__sameDocument = true")
        run = _start_run(workspace)
        try:
            running = page.locator("#running tr[data-task='msg-r']")
            running.wait_for()
            assert "Build the thing" in running.inner_text()
            wait = page.locator("article.wait[data-task='msg-w']")
            assert "May I drop the old table?" in wait.inner_text()
            first = int(running.locator(".iteration").inner_text().split("/")[0])
            page.wait_for_function(  # a later iteration shows up in the same row, live
                "(first) => parseInt((document.querySelector("
                "\"#running tr[data-task='msg-r'] .iteration\") || {}).textContent) > first",
                arg=first,
            )
            assert page.evaluate("window.__sameDocument") is True  # updated, not reloaded
            shot = page.screenshot(full_page=True)
            (tmp_path / "dashboard.png").write_bytes(shot)
            assert shot.startswith(b"\x89PNG\r\n\x1a\n") and len(shot) > 10_000
            wait.locator("input[name=note]").fill("yes, drop it")
            wait.locator("button[value=approve]").click()
            page.wait_for_selector("#flash")
            assert "approval of msg-w noted" in page.inner_text("#flash")
        finally:
            out, err = run.communicate(timeout=300)
    assert run.returncode == 0, out + err
    resumed = run_once(load_settings(workspace), RunOptions())
    assert resumed.outcome.value == "success" and resumed.reason_codes[0] == "WAIT_STATE_RESUMED"
    stdin = fake_claude.task_calls[-1]["stdin"]
    assert "Approved by web:alice" in stdin and "yes, drop it" in stdin


def test_an_action_without_authentication_is_refused_in_the_browser(
    workspace: Path, page: Any
) -> None:
    """Without logging in the page offers no action, and a form posted anyway (or, logged in,
    a request without the CSRF token) is refused: the wait is untouched."""
    write_message(workspace, "msg-w")
    settings = load_settings(workspace)
    with Store(settings.db_path) as store:
        save_approval_wait(settings, store, "msg-w", waitFor="May I?")
    post = (
        "async (body) => (await fetch('/actions/approve', {method: 'POST', body:"
        " new URLSearchParams(body), headers: {Accept: 'application/json'}})).status"
    )
    with dashboard(workspace) as served:
        page.goto(served.url)
        wait = page.locator("article.wait[data-task='msg-w']")
        assert "Log in" in wait.inner_text() and wait.locator("button").count() == 0
        assert page.evaluate(post, {"task": "msg-w", "note": "sneaky"}) == 401
        _log_in(page, served.url)
        assert page.evaluate(post, {"task": "msg-w", "note": "sneaky"}) == 403
    folder = intercom.root(settings) / "msg-w"
    assert not list(folder.glob("*.json")) if folder.exists() else True
    assert (workspace / "wait_states" / "msg-w.json").exists()


def test_waits_are_told_apart_and_an_approval_shows_its_result_in_the_browser(
    workspace: Path, page: Any
) -> None:
    """A wait for a person and a wait for a moment sit under their own headings; Approve says
    what it did at the top of the page, and the wait then says it is answered instead of
    asking again."""
    settings = load_settings(workspace)
    later = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    for task, fields in (
        ("msg-ask", {"waitFor": "May I drop the table?"}),
        ("msg-later", {"resumeWhen": "time", "resumeAt": later, "waitFor": "the usage reset"}),
    ):
        write_message(workspace, task)
        with Store(settings.db_path) as store:
            save_approval_wait(settings, store, task, **fields)
    with dashboard(workspace) as served:
        _log_in(page, served.url)
        person = page.locator("#waits-person")
        assert "Waiting for a person" in person.inner_text()
        assert person.locator("article.wait[data-task='msg-ask']").count() == 1
        moment = page.locator("#waits-time")
        assert moment.locator("article.wait[data-task='msg-later']").count() == 1
        assert moment.locator("button[value=approve]").count() == 0
        person.locator("button[value=approve]").click()
        page.wait_for_selector("#flash")
        assert "approval of msg-ask noted" in page.inner_text("#flash")
        answered = page.locator("article.wait[data-task='msg-ask'] .answered")
        assert "the next run resumes it" in answered.inner_text()
        assert page.locator("article.wait[data-task='msg-ask'] button[value=approve]").count() == 0
