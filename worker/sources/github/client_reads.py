"""The reads the source and the waits make through `GitHubClient` (a mixin): the token's user,
an issue, its comments and events, a collaborator's permission (the trust check), the
description's last edit; and `label_event`, read from an issue's events.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from worker.sources.github.http import GitHubError, Response

log = logging.getLogger(__name__)

_WRITE_PERMISSIONS = {"admin", "maintain", "write"}


_LAST_EDIT = (
    "query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, "
    "name: $name) { issue(number: $number) { lastEditedAt editor { login } } } }"
)


def _object(response: Response, path: str) -> dict[str, Any]:
    """The answer's JSON object; a GitHubError naming the request when it is something else."""
    if not isinstance(response.data, dict):
        raise GitHubError(f"GET {path}: expected an object, got {type(response.data).__name__}")
    return response.data


def label_event(events: list[dict[str, Any]], label: str) -> dict[str, Any] | None:
    """The last event that applied `label` (from an issue's events), None when none did."""
    found = None
    for event in events:
        if event.get("event") == "labeled" and (event.get("label") or {}).get("name") == label:
            found = event
    return found


class ClientReads:
    """`GitHubClient`'s reads (a mixin: the requests and the requester are the client's)."""

    _login: str | None
    _requester: Any

    if TYPE_CHECKING:

        def request(
            self,
            verb: str,
            path: str,
            *,
            params: dict[str, Any] | None = None,
            body: Any = None,
            headers: dict[str, str] | None = None,
            retry: bool = True,
        ) -> Response: ...
        def get(
            self, path: str, *, params: dict[str, Any] | None = None, cache_key: str | None = None
        ) -> Response: ...
        def paginate(
            self,
            path: str,
            *,
            params: dict[str, Any] | None = None,
            limit: int = 1000,
            cache_key: str | None = None,
        ) -> Iterator[dict[str, Any]]: ...

    # -- reads used by the source and the waits ---------------------------------------------
    def login(self) -> str | None:
        """The token's user (conditional GET /user, cached); None without a token."""
        if self._login is None:
            try:
                self._login = _object(self.get("/user", cache_key="user"), "/user").get("login")
            except GitHubError as exc:
                log.warning("github: cannot read the token's user: %s", exc)
                return None
        return self._login

    def issue(self, repo: str, number: int) -> dict[str, Any]:
        path = f"/repos/{repo}/issues/{number}"
        return _object(self.request("GET", path), path)

    def comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        return list(self.paginate(f"/repos/{repo}/issues/{number}/comments"))

    def events(self, repo: str, number: int) -> list[dict[str, Any]]:
        return list(self.paginate(f"/repos/{repo}/issues/{number}/events"))

    def permission(self, repo: str, login: str) -> str:
        """`admin`, `maintain`, `write`, `triage`, `read` or `none` (no such collaborator)."""
        try:
            path = f"/repos/{repo}/collaborators/{quote(login)}/permission"
            data = _object(self.request("GET", path), path)
        except GitHubError as exc:
            if exc.status in (403, 404) and not exc.rate_limited:  # a limit is no "no"
                return "none"
            raise
        role = str(data.get("role_name") or "")
        return role if role in _WRITE_PERMISSIONS else str(data.get("permission") or "none")

    def last_edit(self, repo: str, number: int) -> tuple[str, str] | None:
        """Who last edited the issue's description and when (an API timestamp); None when
        nobody did. REST does not say: one GraphQL query (`lastEditedAt`, `editor`)."""
        owner, name = repo.split("/", 1)
        query = {"query": _LAST_EDIT, "variables": {"owner": owner, "name": name, "number": number}}
        answer = self.request("POST", self._requester.graphql_url, body=query).data
        issue = None
        if isinstance(answer, dict) and not answer.get("errors"):
            issue = ((answer.get("data") or {}).get("repository") or {}).get("issue")
        if not isinstance(issue, dict):
            problem = answer.get("errors") if isinstance(answer, dict) else answer
            raise GitHubError(f"GraphQL {repo}#{number}: cannot read its last edit: {problem}")
        if not issue.get("lastEditedAt"):
            return None
        return str((issue.get("editor") or {}).get("login") or ""), str(issue["lastEditedAt"])

    def has_write_access(self, repo: str, login: str) -> bool:
        """True when `login` may push to `repo` (admin, maintain or write)."""
        return self.permission(repo, login) in _WRITE_PERMISSIONS
