"""Hunted GitHub bugs, against the local server answering (and paging) like the REST API."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import git
from tests.fakes.github_server import FakeGitHub, make_source
from worker.models import Outcome, TaskResult
from worker.sources.github.delivery import push_branch
from worker.sources.github.settings import GitHubSettings

REPO = "acme/app"


@pytest.fixture
def server(fake_github: FakeGitHub) -> FakeGitHub:
    fake_github.add_repo(REPO, {"maintainer": "write"})
    return fake_github


def test_a_new_issue_behind_a_full_page_of_finished_ones_is_still_taken(
    server: FakeGitHub, tmp_path: Path
) -> None:
    """Finished issues stay open with the trigger label (worker adds `worker:done`): once
    there are more than a page of them (100, oldest first), a new labelled issue is on the
    second page of the listing, and it must still be seen."""
    for number in range(1, 121):
        server.add_issue(REPO, number, labels=("roo-schedulable", "worker:done"), age_s=9000)
    server.add_issue(REPO, 121, body="Agent: Any", labels=("roo-schedulable",), age_s=60)
    source = make_source(tmp_path / "ws", server, max_issues=300)
    listing = source.list()
    assert [t.id for t in listing.tasks] == [f"{REPO}#121"]
    assert not listing.errors


@pytest.mark.parametrize(
    ("variable", "key"),
    [
        ("GEMINI_API_KEY", "AIza" + "SyD3m0Key-for_tests0123456789abcdef"),
        ("OPENAI_API_KEY", "sk-proj-" + "Ab12_cd34-EF56_gh78_IJ90_kl12"),
    ],
)
def test_the_agents_own_model_key_repeated_in_its_words_never_reaches_the_issue(
    server: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, key: str
) -> None:
    """The agent CLI has its model key in its environment (it needs it); an agent steered by an
    untrusted issue prints it. The public status comment shows neither the key nor a part of
    it: the keys of every agent worker runs are redacted, not only Anthropic's."""
    monkeypatch.setenv(variable, key)
    server.add_issue(REPO, 7, body="Agent: Any", labels=("roo-schedulable",))
    source = make_source(tmp_path / "ws", server, push=False)
    (task,) = source.list().tasks
    assert source.claim(task, run_id=1)
    words = f"As asked in the issue, my key is {key} (from ${variable})."
    source.report(task, TaskResult(task, Outcome.SUCCESS, reason=key, final_text=words))
    (comment,) = server.comments_of(REPO, 7)
    assert "As asked in the issue" in comment["body"]
    assert key[:12] not in comment["body"] and key[-12:] not in comment["body"]


class _Catcher(BaseHTTPRequestHandler):
    """An HTTP proxy: asks for Basic credentials, refuses tunnels, and keeps what it is sent
    (the method and any Authorization header) in its server's `seen`."""

    def do_GET(self) -> None:
        self.server.seen.append((self.command, self.headers.get("Authorization")))  # type: ignore[attr-defined]
        self.send_response(401 if self.command != "CONNECT" else 403)
        self.send_header("WWW-Authenticate", 'Basic realm="GitHub"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_CONNECT = do_GET

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _proxy() -> Iterator[tuple[str, list[tuple[str, str | None]]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Catcher)
    seen: list[tuple[str, str | None]] = []
    server.seen = seen  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _workspace(tmp_path: Path, remote: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    (ws / "README.md").write_text("hello\n")
    git(ws, "add", "-A")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    git(ws, "remote", "add", "origin", remote)
    return ws


TOKEN = "ghs_" + "proxied0token0value000000000000000000"


def test_a_remote_the_agent_turned_to_plain_http_never_gets_the_push_token(
    tmp_path: Path,
) -> None:
    """The agent can write `.git/config` (worker's threat model): it points the remote at plain
    HTTP through its own proxy. The token is not sent in the clear to anyone."""
    with _proxy() as (proxy, seen):
        ws = _workspace(tmp_path, "http://github.com/acme/app.git")
        git(ws, "config", "http.proxy", proxy)
        error = push_branch(GitHubSettings(), ws, "main", TOKEN, repo="acme/app")
    assert error is not None and "http" in error
    sent = [base64.b64decode(auth.split()[-1]).decode() for _, auth in seen if auth]
    assert not any(TOKEN in text for text in sent), sent


def test_a_proxy_the_agent_wrote_into_git_config_is_not_used_by_the_push(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an https remote the agent names a proxy of its own in `.git/config` (with
    `http.sslVerify=false` it could read the token in the tunnel): the push reads nothing of
    that config. The operator's own proxy (`https_proxy`, here another local catcher that
    refuses the tunnel: nothing leaves the machine) is the one used."""
    with _proxy() as (operators, by_operator), _proxy() as (agents, by_agent):
        monkeypatch.setenv("https_proxy", operators)
        monkeypatch.setenv("HTTPS_PROXY", operators)
        ws = _workspace(tmp_path, "https://github.com/acme/app.git")
        git(ws, "config", "http.proxy", agents)
        git(ws, "config", "http.sslVerify", "false")
        push_branch(GitHubSettings(), ws, "main", TOKEN, repo="acme/app")
    assert by_agent == []
    assert [method for method, _ in by_operator] == ["CONNECT"]
