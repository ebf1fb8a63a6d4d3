"""The GitHub side of phase 0: which waited-on issues changed, their comments and events,
and who may approve.

One conditional request per repository per run (`GET /repos/{repo}/issues?since=...` with the
ETag of the previous answer, kept by the GitHub client in SQLite; a 304 costs no rate limit)
says which issues changed; only those are read further. So when nothing changed on GitHub, no
request is made per wait state.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from worker.sources.github.client import GitHubClient

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Comment:
    author: str
    body: str
    created_at: datetime
    url: str = ""
    # Changed since it was written: by its author, or by anyone with write access to the
    # repository, who can edit any comment there while it still reads as the author's.
    edited: bool = False


@dataclass(frozen=True)
class IssueEvent:
    event: str  # closed | reopened | labeled | merged (a linked pull request)
    actor: str
    created_at: datetime
    detail: str = ""  # the label, the pull request, the commit


class GitHubLook(Protocol):
    """What the GitHub conditions need; `costed` counts requests that cost rate limit."""

    @property
    def costed(self) -> int: ...

    @property
    def client(self) -> GitHubClient | None:
        """The client itself, for the pull requests' reads (`worker.waits.github_pr`); None
        where nothing may be asked."""
        ...

    def updated(self, repo: str, since: datetime) -> dict[int, datetime]:
        """`{number: updated_at}` of the repo's issues updated after `since` (one look)."""
        ...

    def comments(self, repo: str, number: int, since: datetime) -> list[Comment]: ...

    def events(self, repo: str, number: int, since: datetime) -> list[IssueEvent]: ...

    def may_approve(self, repo: str, login: str) -> bool:
        """True when `login` has write access to the repository."""
        ...


@dataclass
class ClientLook:
    """GitHubLook over worker's GitHub client (retries, ETag cache, rate-limit floor)."""

    client: GitHubClient
    _updated: dict[str, dict[int, datetime]] = field(default_factory=dict)
    _access: dict[tuple[str, str], bool] = field(default_factory=dict)
    _start: int = 0

    def __post_init__(self) -> None:
        self._start = self.client.stats.costed

    @property
    def costed(self) -> int:
        return self.client.stats.costed - self._start

    def updated(self, repo: str, since: datetime) -> dict[int, datetime]:
        if repo in self._updated:
            return self._updated[repo]
        if not self.client.polling_allowed():
            raise OSError(f"rate limit nearly spent ({self.client.rate.describe()})")
        path = f"/repos/{repo}/issues"
        params = {"state": "all", "since": iso(since), "sort": "updated", "direction": "desc"}
        items = self.client.paginate(path, params=params, cache_key=f"waits:issues:{repo}")
        found = {int(i["number"]): parse(i["updated_at"]) for i in items if i.get("updated_at")}
        self._updated[repo] = found
        return found

    def comments(self, repo: str, number: int, since: datetime) -> list[Comment]:
        items = self.client.paginate(
            f"/repos/{repo}/issues/{number}/comments", params={"since": iso(since)}
        )
        return [
            Comment(
                (i.get("user") or {}).get("login", ""),
                i.get("body") or "",
                parse(i["created_at"]),
                i.get("html_url", ""),
                parse(i.get("updated_at") or i["created_at"]) > parse(i["created_at"]),
            )
            for i in items
        ]

    def events(self, repo: str, number: int, since: datetime) -> list[IssueEvent]:
        found = []
        for item in self.client.paginate(f"/repos/{repo}/issues/{number}/events"):
            kind, at = item.get("event"), item.get("created_at")
            actor = (item.get("actor") or {}).get("login", "")
            if not at or kind not in ("closed", "reopened", "labeled", "merged"):
                continue
            detail = ""
            if kind == "labeled":
                detail = (item.get("label") or {}).get("name", "")
            elif item.get("commit_id"):
                # Closed by a commit: a linked pull request with a closing keyword was merged.
                detail = f"commit {item['commit_id']}"
                kind = "merged" if kind == "closed" else kind
            found.append(IssueEvent(kind, actor, parse(at), detail))
        return [event for event in found if event.created_at >= whole(since)]

    def may_approve(self, repo: str, login: str) -> bool:
        key = (repo, login)
        if key not in self._access:
            self._access[key] = self.client.has_write_access(repo, login)
        return self._access[key]


def iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def whole(at: datetime) -> datetime:
    """GitHub's times have whole seconds: compare at that precision."""
    return at.replace(microsecond=0)
