"""Claims on GitHub issues: the hidden marker of the status comment, liveness, trust.

Each task run has ONE status comment whose first line is
`<!-- worker:claim machine=M task=owner/name#1 run=R state=active -->`. A claim is live while
its state is `active` and its comment was written (created or renewed) less than `claim_ttl_s`
ago. Of the live claims, the one with the smallest comment id (GitHub's ids grow with time) is
the earliest and wins; the others back off. Markers only count at the start of a comment by a
collaborator (or the token's user), so a quoted or forged marker cannot steal or block a claim.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from worker.sources.github.client import GitHubClient, GitHubError, label_event
from worker.sources.github.selection import timestamp
from worker.sources.github.settings import GitHubSettings

_MARKER = re.compile(
    r"^<!-- worker:claim machine=(?P<machine>\S+) task=(?P<task>\S+) run=(?P<run>\S+)"
    r" state=(?P<state>[a-z_]+) -->"
)
# Authors whose markers count: people with a role in the repository (author_association).
_TRUSTED_ASSOCIATIONS = {"OWNER", "MEMBER", "COLLABORATOR"}
ACTIVE = "active"


@dataclass(frozen=True)
class Claim:
    comment_id: int
    machine: str
    task: str
    run: str
    state: str
    login: str
    written_at: float  # the comment's last update: the claim's heartbeat

    def live(self, ttl_s: float, now: float | None = None) -> bool:
        now = time.time() if now is None else now
        return self.state == ACTIVE and now - self.written_at < ttl_s


def marker(machine: str, task: str, run: int | str, state: str = ACTIVE) -> str:
    safe = "/#:@.-_"
    return (
        f"<!-- worker:claim machine={quote(machine, safe=safe)} task={quote(task, safe=safe)}"
        f" run={quote(str(run), safe=safe)} state={state} -->"
    )


def parse_claims(
    comments: list[dict[str, Any]], task: str, own_login: str | None = None
) -> list[Claim]:
    """The claim markers for `task` in an issue's comments, oldest first."""
    found = []
    for comment in comments:
        match = _MARKER.match(str(comment.get("body") or ""))
        if match is None or unquote(match["task"]) != task:
            continue
        login = str((comment.get("user") or {}).get("login") or "")
        if comment.get("author_association") not in _TRUSTED_ASSOCIATIONS and login != own_login:
            continue
        written = max(timestamp(comment.get("created_at")), timestamp(comment.get("updated_at")))
        found.append(
            Claim(
                int(comment["id"]),
                unquote(match["machine"]),
                task,
                unquote(match["run"]),
                match["state"],
                login,
                written,
            )
        )
    return sorted(found, key=lambda claim: claim.comment_id)


def earliest_live(
    claims: list[Claim], ttl_s: float, now: float | None = None, ignore: set[int] | None = None
) -> Claim | None:
    live = [c for c in claims if c.live(ttl_s, now) and c.comment_id not in (ignore or set())]
    return min(live, key=lambda c: c.comment_id, default=None)


def find_own(claims: list[Claim], machine: str, run: str | None = None) -> Claim | None:
    """This machine's latest claim comment for the task (of run `run` when given)."""
    mine = [c for c in claims if c.machine == machine and (run is None or c.run == run)]
    return mine[-1] if mine else None


def check_trust(
    client: GitHubClient, settings: GitHubSettings, repo: str, number: int
) -> tuple[bool, str]:
    """Was the trigger label applied by someone trusted (allow-list, else write access), and
    has nobody untrusted changed the issue's title or description since? An author could
    otherwise write a harmless issue, have it labelled, then edit in what the agent runs."""
    events = client.events(repo, number)
    labelled = label_event(events, settings.label)
    actor = (labelled.get("actor") or {}).get("login") if labelled else None
    if labelled is None or not actor:
        return False, f"nobody is recorded as having applied {settings.label!r}"
    if not _trusted(client, settings, repo, actor):
        return False, f"{settings.label!r} was applied by {actor}, who has no write access"
    changed = _changed_since(client, settings, repo, number, events, labelled)
    if changed:
        return False, f"{changed} after {actor} applied {settings.label!r}; apply it again"
    return True, actor


def _trusted(client: GitHubClient, settings: GitHubSettings, repo: str, login: str) -> bool:
    if login.lower() in {name.lower() for name in settings.trusted_users}:
        return True
    return bool(login) and client.has_write_access(repo, login)


def _changed_since(
    client: GitHubClient,
    settings: GitHubSettings,
    repo: str,
    number: int,
    events: list[dict[str, Any]],
    labelled: dict[str, Any],
) -> str | None:
    """Who untrusted renamed the issue or edited its description at or after the label."""
    since = timestamp(labelled.get("created_at"))
    for event in events:
        if event.get("event") == "renamed" and timestamp(event.get("created_at")) >= since:
            who = str((event.get("actor") or {}).get("login") or "")
            if not _trusted(client, settings, repo, who):
                return f"the title was changed by {who or 'a deleted account'}"
    edit = client.last_edit(repo, number)
    if edit is None or timestamp(edit[1]) < since:
        return None
    editor = edit[0]
    if _trusted(client, settings, repo, editor):
        return None
    return f"the description was edited by {editor or 'a deleted account'}"


def create_once(
    client: GitHubClient, create: tuple[str, str, dict[str, Any]], find: Any
) -> dict[str, Any]:
    """POST that is never duplicated: after a failed attempt (whose write may have happened
    anyway), `find()` looks for the object before trying again."""
    verb, path, body = create
    attempts = client.settings.retries + 1
    for attempt in range(1, attempts + 1):
        try:
            return dict(client.request(verb, path, body=body, retry=False).data)
        except GitHubError as exc:
            if attempt == attempts or not client.retryable(exc):
                raise
            time.sleep(client.backoff(attempt, exc))
            existing = find()
            if existing is not None:
                return dict(existing)
    raise AssertionError("unreachable")
