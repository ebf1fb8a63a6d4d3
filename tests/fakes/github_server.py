"""A local HTTP server that answers like the GitHub REST API (the parts worker uses).

Real JSON shapes for issues, labels, comments, events, assignees, collaborator permissions,
pulls and users; `X-RateLimit-*` headers on every answer; ETags on GETs, and `304 Not Modified`
(free of rate limit, as on GitHub) when `If-None-Match` matches. Faults are injected per
request pattern: an HTTP status (500, 502, 403 with `X-RateLimit-Remaining: 0`, 404 ...), a
slow answer (a client timeout), or "apply the write, then fail the answer" (a retried request).
`server.log` records every request: method, path, status, and whether it cost rate limit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlparse

LIMIT = 5000


def iso(epoch: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if epoch is None else epoch, UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


def user(login: str) -> dict[str, Any]:
    return {
        "login": login,
        "id": abs(hash(login)) % 10**7,
        "type": "User",
        "url": f"https://api.github.com/users/{login}",
    }


_ROLES = ("read", "triage", "write", "maintain", "admin")
_GRANTS = ("pull", "triage", "push", "maintain", "admin")


def permissions(role: str) -> dict[str, bool]:
    """The `permissions` object of a repository answer for a user with `role`."""
    rank = _ROLES.index(role) if role in _ROLES else 0
    return {grant: index <= rank for index, grant in enumerate(_GRANTS)}


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int = 500
    times: int = 1
    delay: float = 0.0  # sleep before answering (longer than the client timeout = timeout)
    apply_first: bool = False  # do the write, then answer with the fault
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "Server Error"
    body: Any = None  # answer with this JSON instead of `{"message": ...}` (malformed answers)

    def answer(self) -> Any:
        return {"message": self.message} if self.body is None else self.body


@dataclass
class Logged:
    method: str
    path: str
    status: int
    costed: bool


class FakeGitHub:
    """State plus a threaded server on 127.0.0.1; `url` is the base URL for PyGithub."""

    def __init__(self, tokens: dict[str, str] | None = None) -> None:
        self.tokens = tokens or {"test-token-abc": "worker-bot"}
        self.repos: dict[str, dict[str, Any]] = {}
        self.faults: list[Fault] = []
        self.log: list[Logged] = []
        self.remaining = LIMIT
        self.lock = threading.RLock()
        self.comment_barrier: threading.Barrier | None = None
        self._ids = 1000
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> FakeGitHub:
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.comment_barrier is not None:
            self.comment_barrier.abort()
        self.httpd.shutdown()
        self.httpd.server_close()

    def next_id(self) -> int:
        with self.lock:
            self._ids += 1
            return self._ids

    # -- seeding ----------------------------------------------------------------------------
    def add_repo(self, full: str, collaborators: dict[str, str] | None = None) -> dict[str, Any]:
        repo = {
            "full_name": full,
            "default_branch": "main",
            "issues": {},
            "comments": {},
            "events": {},
            "pulls": [],
            "commits": {},  # sha -> {"check_runs": [...], "statuses": [...]}
            "protection": {},  # branch -> required check names (absent: 404, unreadable)
            "collaborators": {"worker-bot": "write", **(collaborators or {})},
        }
        self.repos[full] = repo
        return repo

    def add_issue(
        self,
        full: str,
        number: int,
        title: str = "",
        body: str = "",
        labels: tuple[str, ...] = (),
        labeled_by: str = "maintainer",
        author: str = "reporter",
        age_s: float = 3600,
        **extra: Any,
    ) -> dict[str, Any]:
        repo = self.repos[full]
        created = time.time() - age_s
        issue = {
            "id": self.next_id(),
            "number": number,
            "title": title or f"issue {number}",
            "body": body,
            "state": "open",
            "locked": False,
            "user": user(author),
            "labels": [self._label(name) for name in labels],
            "assignee": None,
            "assignees": [],
            "comments": 0,
            "created_at": iso(created),
            "updated_at": iso(created),
            "closed_at": None,
            "author_association": "NONE",
            "html_url": f"https://github.com/{full}/issues/{number}",
            "url": f"{self.url}/repos/{full}/issues/{number}",
            **extra,
        }
        repo["issues"][number] = issue
        repo["events"][number] = [
            self._event("labeled", labeled_by, name, created) for name in labels
        ]
        return issue

    def add_comment(
        self,
        full: str,
        number: int,
        body: str,
        login: str = "worker-bot",
        age_s: float = 0.0,
        association: str = "COLLABORATOR",
    ) -> dict[str, Any]:
        with self.lock:
            repo = self.repos[full]
            at = iso(time.time() - age_s)
            comment = {
                "id": self.next_id(),
                "body": body,
                "user": user(login),
                "created_at": at,
                "updated_at": at,
                "author_association": association,
                "issue_url": f"{self.url}/repos/{full}/issues/{number}",
                "html_url": f"https://github.com/{full}/issues/{number}#c",
            }
            repo["comments"][comment["id"]] = (number, comment)
            issue = repo["issues"][number]
            issue["comments"] += 1
            issue["updated_at"] = at
            return comment

    def edit_issue(
        self,
        full: str,
        number: int,
        editor: str,
        *,
        body: str | None = None,
        title: str | None = None,
        age_s: float = 0.0,
    ) -> None:
        """`editor` edits the description (GraphQL's `lastEditedAt`, `editor`) and/or renames
        the issue (a `renamed` event), as on GitHub."""
        with self.lock:
            repo = self.repos[full]
            issue, at = repo["issues"][number], time.time() - age_s
            if body is not None:
                issue["body"] = body
                repo.setdefault("edits", {})[number] = (editor, iso(at))
            if title is not None:
                event = self._event("renamed", editor, None, at)
                event["rename"] = {"from": issue["title"], "to": title}
                issue["title"] = title
                repo["events"][number].append(event)
            issue["updated_at"] = iso(at)

    def label(self, full: str, number: int, name: str, by: str, age_s: float = 0.0) -> None:
        """`by` applies label `name` (again, when the issue has it already): a `labeled` event."""
        with self.lock:
            repo = self.repos[full]
            issue, at = repo["issues"][number], time.time() - age_s
            if name not in self.labels_of(full, number):
                issue["labels"].append(self._label(name))
            repo["events"][number].append(self._event("labeled", by, name, at))
            issue["updated_at"] = iso(at)

    def comments_of(self, full: str, number: int) -> list[dict[str, Any]]:
        return [c for n, c in self.repos[full]["comments"].values() if n == number]

    def labels_of(self, full: str, number: int) -> list[str]:
        return [label["name"] for label in self.repos[full]["issues"][number]["labels"]]

    def fail(
        self,
        method: str,
        pattern: str,
        status: int = 500,
        *,
        times: int = 1,
        delay: float = 0.0,
        apply_first: bool = False,
        headers: dict[str, str] | None = None,
        message: str = "Server Error",
        body: Any = None,
    ) -> None:
        self.faults.append(
            Fault(
                method,
                re.compile(pattern),
                status,
                times,
                delay,
                apply_first,
                headers or {},
                message,
                body,
            )
        )

    def count(self, method: str | None = None, pattern: str = "") -> int:
        """How many requests of `method` (any when None) had a path matching `pattern`."""
        return sum(
            1
            for e in self.log
            if (method is None or e.method == method) and re.search(pattern, e.path)
        )

    @property
    def costed(self) -> int:
        return sum(1 for e in self.log if e.costed)

    def _label(self, name: str) -> dict[str, Any]:
        return {
            "id": abs(hash(name)) % 10**7,
            "name": name,
            "color": "ededed",
            "default": False,
            "description": None,
        }

    def _event(self, kind: str, actor: str, label: str | None, at: float) -> dict[str, Any]:
        event: dict[str, Any] = {
            "id": self.next_id(),
            "event": kind,
            "actor": user(actor),
            "created_at": iso(at),
            "commit_id": None,
        }
        if label is not None:
            event["label"] = {"name": label, "color": "ededed"}
        return event

    def _graphql(self, body: Any) -> tuple[int, Any, dict[str, str]]:
        """The one query worker sends: an issue's `lastEditedAt` and `editor`."""
        query = str((body or {}).get("query") or "")
        variables = (body or {}).get("variables") or {}
        if "lastEditedAt" not in query:
            return 200, {"errors": [{"message": "unsupported query in the fake"}]}, {}
        repo = self.repos.get(f"{variables.get('owner')}/{variables.get('name')}")
        issue = repo["issues"].get(variables.get("number")) if repo else None
        if repo is None or issue is None:
            error = {"type": "NOT_FOUND", "message": "Could not resolve to an Issue"}
            return 200, {"data": {"repository": None}, "errors": [error]}, {}
        edit = repo.get("edits", {}).get(variables["number"])
        found = {"lastEditedAt": None, "editor": None}
        if edit is not None:
            found = {"lastEditedAt": edit[1], "editor": user(edit[0]) if edit[0] else None}
        return 200, {"data": {"repository": {"issue": found}}}, {}

    # -- routing ----------------------------------------------------------------------------
    def handle(
        self, method: str, path: str, query: dict[str, str], body: Any, login: str
    ) -> tuple[int, Any, dict[str, str]]:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts == ["user"]:
            return 200, user(login), {}
        if parts == ["graphql"] and method == "POST":
            with self.lock:
                return self._graphql(body)
        if parts == ["rate_limit"]:
            return 200, {"resources": {"core": {"limit": LIMIT, "remaining": self.remaining}}}, {}
        if len(parts) < 3 or parts[0] != "repos":
            return 404, {"message": "Not Found"}, {}
        full = f"{parts[1]}/{parts[2]}"
        repo = self.repos.get(full)
        if repo is None:
            return 404, {"message": "Not Found"}, {}
        rest = parts[3:]
        with self.lock:
            return self._repo(method, repo, rest, query, body, login)

    def _repo(
        self,
        method: str,
        repo: dict[str, Any],
        rest: list[str],
        query: dict[str, str],
        body: Any,
        login: str,
    ) -> tuple[int, Any, dict[str, str]]:
        full = repo["full_name"]
        if not rest:
            answer = {"full_name": full, "default_branch": repo["default_branch"], "private": False}
            # As on GitHub: what the token's user may do here.
            answer["permissions"] = permissions(repo["collaborators"].get(login, "read"))
            return 200, answer, {}
        if rest[0] == "collaborators" and len(rest) == 3:
            perm = repo["collaborators"].get(rest[1])
            if perm is None:
                return 200, {"permission": "read", "role_name": "read", "user": user(rest[1])}, {}
            return (
                200,
                {
                    "permission": "write" if perm == "maintain" else perm,
                    "role_name": perm,
                    "user": user(rest[1]),
                },
                {},
            )
        if rest[0] == "pulls" and len(rest) == 1:
            return self._pulls(method, repo, query, body)
        if rest[0] in ("pulls", "commits", "check-runs", "branches"):
            return self._pull_parts(method, repo, rest, body, login)
        if (
            rest[0] == "issues"
            and len(rest) >= 2
            and rest[1].isdigit()
            and self.pull_of(full, int(rest[1]))
        ):
            return self._pull_as_issue(method, repo, int(rest[1]), rest[2:], body, login)
        if rest[:2] == ["issues", "comments"] and len(rest) == 3:
            found = repo["comments"].get(int(rest[2]))
            if found is None:
                return 404, {"message": "Not Found"}, {}
            if method == "DELETE":
                del repo["comments"][int(rest[2])]
                return 204, None, {}
            if method == "GET":
                return 200, found[1], {}
            found[1]["body"] = body["body"]
            found[1]["updated_at"] = iso()
            repo["issues"][found[0]]["updated_at"] = iso()
            return 200, found[1], {}
        if rest == ["issues"]:
            return 200, self._list_issues(repo, query), {}
        if rest[0] != "issues" or len(rest) < 2:
            return 404, {"message": "Not Found"}, {}
        issue = repo["issues"].get(int(rest[1]))
        if issue is None:
            return 404, {"message": "Not Found"}, {}
        number, tail = issue["number"], rest[2:]
        if not tail:
            if method == "PATCH":
                issue.update({k: v for k, v in body.items() if k in ("state", "title")})
                issue["updated_at"] = iso()
            return 200, issue, {}
        if tail == ["comments"]:
            if method == "POST":
                if self.comment_barrier is not None:
                    self.lock.release()
                    try:
                        self.comment_barrier.wait(timeout=10)
                    finally:
                        self.lock.acquire()
                return 201, self.add_comment(full, number, body["body"], login), {}
            return 200, self.comments_of(full, number), {}
        if tail == ["events"]:
            return 200, repo["events"][number], {}
        if tail[0] == "labels":
            if method == "POST":
                for name in body["labels"]:
                    if name not in self.labels_of(full, number):
                        issue["labels"].append(self._label(name))
                        repo["events"][number].append(
                            self._event("labeled", login, name, time.time())
                        )
            elif method == "DELETE" and len(tail) == 2:
                if tail[1] not in self.labels_of(full, number):
                    return 404, {"message": "Label does not exist"}, {}
                issue["labels"] = [lb for lb in issue["labels"] if lb["name"] != tail[1]]
            issue["updated_at"] = iso()
            return 200, issue["labels"], {}
        if tail == ["assignees"]:
            names = [n for n in body["assignees"] if n in repo["collaborators"]]
            if method == "POST":
                current = {a["login"] for a in issue["assignees"]}
                issue["assignees"] += [user(n) for n in names if n not in current]
            else:
                issue["assignees"] = [a for a in issue["assignees"] if a["login"] not in names]
            issue["assignee"] = issue["assignees"][0] if issue["assignees"] else None
            return 201 if method == "POST" else 200, issue, {}
        return 404, {"message": "Not Found"}, {}

    def _list_issues(self, repo: dict[str, Any], query: dict[str, str]) -> list[dict[str, Any]]:
        wanted = [name for name in query.get("labels", "").split(",") if name]
        state = query.get("state", "open")
        found = [
            i
            for i in repo["issues"].values()
            if (state == "all" or i["state"] == state)
            and all(w in [lb["name"] for lb in i["labels"]] for w in wanted)
        ]
        # GitHub's default is newest first; `direction=asc` is oldest first.
        return sorted(found, key=lambda i: i["number"], reverse=query.get("direction") != "asc")

    def _pulls(
        self, method: str, repo: dict[str, Any], query: dict[str, str], body: Any
    ) -> tuple[int, Any, dict[str, str]]:
        if method == "POST":
            if any(p["head"]["ref"] == body["head"] for p in repo["pulls"]):
                return (
                    422,
                    {
                        "message": "Validation Failed",
                        "errors": [{"message": "A pull request already exists"}],
                    },
                    {},
                )
            number = 1000 + len(repo["pulls"])
            pull = {
                "id": self.next_id(),
                "number": number,
                "state": "open",
                "title": body["title"],
                "body": body.get("body"),
                "head": {"ref": body["head"], "label": body["head"], "sha": f"{number:040x}"},
                "base": {"ref": body["base"]},
                "html_url": f"https://github.com/{repo['full_name']}/pull/{number}",
                "merged": False,
                "merged_at": None,
                "merged_by": None,
                "mergeable": True,
                "labels": [],
                "user": user("worker-bot"),
                "created_at": iso(),
                "updated_at": iso(),
                # the fake's own bookkeeping (GitHub keeps these elsewhere)
                "_reviews": [],
                "_comments": [],
                "_events": [],
                "_conversation": [],  # comments on the pull request as an issue
                "_closed_by": None,
            }
            repo["pulls"].append(pull)
            return 201, _public(pull), {}
        head = query.get("head", "").split(":")[-1]
        state = query.get("state", "open")
        found = [
            _public(p)
            for p in repo["pulls"]
            if (not head or p["head"]["ref"] == head) and state in ("all", p["state"])
        ]
        return 200, found, {}

    # -- pull requests: reviews, checks, merge (seeded by the tests, read by worker) ---------
    def pull_of(self, full: str, number: int) -> dict[str, Any] | None:
        return next((p for p in self.repos[full]["pulls"] if p["number"] == number), None)

    def set_checks(
        self,
        full: str,
        sha: str,
        runs: Sequence[tuple[str, str, str | None, str]] = (),
        statuses: Sequence[tuple[str, str, str]] = (),
    ) -> None:
        """The head commit's check runs `(name, status, conclusion, output text)` and commit
        statuses `(context, state, description)`."""
        with self.lock:
            self.repos[full]["commits"][sha] = {
                "check_runs": [
                    {
                        "id": self.next_id(),
                        "name": name,
                        "status": status,
                        "conclusion": conclusion,
                        "head_sha": sha,
                        "output": {"title": f"{name}: {conclusion}", "summary": "", "text": text},
                    }
                    for name, status, conclusion, text in runs
                ],
                "statuses": [
                    {"context": c, "state": st, "description": d, "target_url": ""}
                    for c, st, d in statuses
                ],
            }

    def add_review(
        self,
        full: str,
        number: int,
        login: str,
        state: str,
        body: str = "",
        commit_id: str | None = None,
    ) -> None:
        with self.lock:
            pull = self.pull_of(full, number)
            assert pull is not None
            pull["_reviews"].append(
                {
                    "id": self.next_id(),
                    "user": user(login),
                    "state": state,
                    "body": body,
                    "commit_id": commit_id or pull["head"]["sha"],
                    "submitted_at": iso(),
                }
            )
            pull["updated_at"] = iso()

    def add_review_comment(
        self, full: str, number: int, login: str, path: str, line: int, body: str
    ) -> None:
        with self.lock:
            pull = self.pull_of(full, number)
            assert pull is not None
            at = iso()
            pull["_comments"].append(
                {
                    "id": self.next_id(),
                    "user": user(login),
                    "path": path,
                    "line": line,
                    "body": body,
                    "created_at": at,
                    "updated_at": at,
                }
            )

    def comment_on_pull(self, full: str, number: int, body: str, login: str) -> None:
        """A comment in the pull request's conversation (an issue comment on its number)."""
        with self.lock:
            pull = self.pull_of(full, number)
            assert pull is not None
            comment = {"id": self.next_id(), "body": body, "user": user(login)}
            comment["created_at"] = comment["updated_at"] = iso()
            comment["html_url"] = f"https://github.com/{full}/pull/{number}#c"
            pull["_conversation"].append(comment)
            pull["updated_at"] = comment["created_at"]

    def label_pull(self, full: str, number: int, name: str, by: str) -> None:
        with self.lock:
            pull = self.pull_of(full, number)
            assert pull is not None
            if name not in [lb["name"] for lb in pull["labels"]]:
                pull["labels"].append(self._label(name))
            pull["_events"].append(self._event("labeled", by, name, time.time()))

    def close_pull(self, full: str, number: int, by: str, merged: bool = False) -> None:
        with self.lock:
            pull = self.pull_of(full, number)
            assert pull is not None
            pull["state"] = "closed"
            if merged:
                pull.update(merged=True, merged_at=iso(), merged_by=user(by))
            else:
                pull["_closed_by"] = user(by)

    def _pull_parts(
        self, method: str, repo: dict[str, Any], rest: list[str], body: Any, login: str
    ) -> tuple[int, Any, dict[str, str]]:
        full = repo["full_name"]
        if rest[0] == "commits" and len(rest) == 3:
            found = repo["commits"].get(rest[1], {"check_runs": [], "statuses": []})
            if rest[2] == "check-runs":
                runs = found["check_runs"]
                return 200, {"total_count": len(runs), "check_runs": runs}, {}
            if rest[2] == "status":
                statuses = found["statuses"]
                states = {s["state"] for s in statuses}
                # As on GitHub: no statuses at all reads "pending" with total_count 0.
                state = (
                    "failure"
                    if states & {"failure", "error"}
                    else "pending"
                    if "pending" in states or not statuses
                    else "success"
                )
                return 200, {"state": state, "total_count": len(statuses), "statuses": statuses}, {}
        if rest[0] == "check-runs" and len(rest) == 3 and rest[2] == "annotations":
            return 200, [], {}
        if rest[0] == "branches" and rest[2:] == ["protection", "required_status_checks"]:
            required = repo["protection"].get(rest[1])
            if required is None:
                return 404, {"message": "Branch not protected"}, {}
            return 200, {"strict": False, "contexts": list(required), "checks": []}, {}
        pull = self.pull_of(full, int(rest[1])) if rest[0] == "pulls" else None
        if pull is None:
            return 404, {"message": "Not Found"}, {}
        tail = rest[2:]
        if not tail:
            return 200, _public(pull), {}
        if tail == ["reviews"]:
            return 200, list(pull["_reviews"]), {}
        if tail == ["comments"]:
            return 200, list(pull["_comments"]), {}
        if tail == ["merge"] and method == "PUT":
            if pull["state"] != "open" or not pull["mergeable"]:
                return 405, {"message": "Pull Request is not mergeable"}, {}
            if body.get("sha") and body["sha"] != pull["head"]["sha"]:
                return 409, {"message": "Head branch was modified"}, {}
            self.close_pull(full, pull["number"], login, merged=True)
            pull["_merge_method"] = body.get("merge_method")
            return 200, {"merged": True, "message": "Pull Request successfully merged"}, {}
        return 404, {"message": "Not Found"}, {}

    def _pull_as_issue(
        self,
        method: str,
        repo: dict[str, Any],
        number: int,
        tail: list[str],
        body: Any,
        login: str,
    ) -> tuple[int, Any, dict[str, str]]:
        """A pull request is an issue too: its events (labels), its conversation's comments
        and who closed it."""
        pull = self.pull_of(repo["full_name"], number)
        assert pull is not None
        if tail == ["events"]:
            return 200, list(pull["_events"]), {}
        if tail == ["comments"]:  # the pull request's conversation
            if method == "POST":
                comment = {"id": self.next_id(), "body": body["body"], "user": user(login)}
                comment["created_at"] = comment["updated_at"] = iso()
                pull["_conversation"].append(comment)
                return 201, comment, {}
            return 200, list(pull["_conversation"]), {}
        if not tail:
            return (
                200,
                {"number": number, "state": pull["state"], "closed_by": pull["_closed_by"]},
                {},
            )
        return 404, {"message": "Not Found"}, {}


def _public(pull: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in pull.items() if not k.startswith("_")}


def _handler(fake: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _serve(self) -> None:
            url = urlparse(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            auth = self.headers.get("Authorization", "")
            login = fake.tokens.get(auth.removeprefix("token ").strip())
            fault = self._fault(self.command, url.path)
            if fault is not None and fault.delay:
                time.sleep(fault.delay)
            if login is None:
                status, data, extra = 401, {"message": "Bad credentials"}, {}
            elif fault is not None and not fault.apply_first:
                status, data, extra = fault.status, fault.answer(), fault.headers
            else:
                status, data, extra = fake.handle(self.command, url.path, query, body, login)
                if fault is not None:
                    status, data, extra = fault.status, fault.answer(), fault.headers
            if self.command == "GET" and status == 200 and isinstance(data, list):
                data, extra = _page(data, fake.url + url.path, query, extra)
            payload = b"" if data is None else json.dumps(data).encode()
            etag = '"' + hashlib.sha1(payload).hexdigest() + '"'
            if (
                self.command == "GET"
                and status == 200
                and self.headers.get("If-None-Match") == etag
            ):
                status, payload = 304, b""
            costed = status != 304
            with fake.lock:
                if costed and fake.remaining > 0 and status != 401:
                    fake.remaining -= 1
                fake.log.append(Logged(self.command, url.path, status, costed))
                remaining = extra.get("X-RateLimit-Remaining", str(fake.remaining))
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("X-RateLimit-Limit", str(LIMIT))
            self.send_header("X-RateLimit-Remaining", remaining)
            self.send_header("X-RateLimit-Reset", str(int(time.time()) + 3600))
            self.send_header("X-RateLimit-Resource", "core")
            if self.command == "GET" and status in (200, 304):
                self.send_header("ETag", etag)
            for key, value in extra.items():
                if key != "X-RateLimit-Remaining":
                    self.send_header(key, value)
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(payload)

        def _fault(self, method: str, path: str) -> Fault | None:
            with fake.lock:
                for fault in fake.faults:
                    if fault.times > 0 and fault.method == method and fault.pattern.search(path):
                        fault.times -= 1
                        return fault
            return None

        do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _serve

    return Handler


def _page(
    items: list[Any], address: str, query: dict[str, str], extra: dict[str, str]
) -> tuple[list[Any], dict[str, str]]:
    """One page of a list answer, as GitHub pages them: `per_page` (30 by default, at most
    100) from `page`, and a `Link: <...>; rel="next"` header while more follow."""
    per_page = min(100, int(query.get("per_page", 30)))
    page = int(query.get("page", 1))
    start = (page - 1) * per_page
    if start + per_page < len(items):
        following = urlencode({**query, "page": page + 1})
        extra = {**extra, "Link": f'<{address}?{following}>; rel="next"'}
    return items[start : start + per_page], extra


def settings_for(server: FakeGitHub, **github: Any) -> dict[str, Any]:
    """A `[github]` section pointed at the fake server, with fast retries and no delays. Its
    tasks are worked on in place (most tests' workspaces are no git repository) unless the
    test asks for a delivery (`delivery`, or the older `open_pr`)."""
    if "open_pr" not in github:
        github.setdefault("delivery", "in_place")
    return {
        "repos": ["acme/app"],
        "base_url": server.url,
        "backoff_s": 0.01,
        "request_timeout_s": 1,
        "seconds_between_requests": 0,
        "seconds_between_writes": 0,
        **github,
    }


def make_source(
    workspace: Any, server: FakeGitHub, machine: str = "m1", dry_run: bool = False, **github: Any
) -> Any:
    """A GitHubSource for `workspace` (its own SQLite store) talking to the fake server."""
    from worker.config import load_settings
    from worker.sources.github.source import GitHubSource
    from worker.state.store import Store

    workspace.mkdir(parents=True, exist_ok=True)
    settings = load_settings(
        workspace, env={"WORKER_MACHINE_ID": machine}, github=settings_for(server, **github)
    )
    store = None if dry_run else Store(settings.db_path)
    return GitHubSource(settings, store, dry_run=dry_run)
