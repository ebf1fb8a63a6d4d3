"""Who worker's commits are by, and what its pull requests say.

The author is `[github] commit_author` when set, else the token's own user with GitHub's
`noreply` address (`ID+login@users.noreply.github.com`: the commit is linked to that account,
no mail address is published), else a bot name with an address that reaches nobody. The pull
request's body is the agent's own summary (what changed, why, how it was checked), the files
changed, the cost, and `Closes #N`.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit

from worker.models import TaskResult
from worker.process.proc import redact
from worker.process.workspace_git import BOT_IDENTITY
from worker.sources.github.client import GitHubClient, GitHubError
from worker.sources.github.settings import GitHubSettings

log = logging.getLogger(__name__)

_AUTHOR = re.compile(r"^\s*(?P<name>[^<>]+?)\s*<(?P<email>[^<>\s]+@[^<>\s]+)>\s*$")
SUMMARY_CAP = 3000  # characters of the agent's last words in a pull request's body


def parse_author(text: str) -> tuple[str, str] | None:
    """`Name <email>` as (name, email); None when it is not of that form."""
    found = _AUTHOR.match(text)
    return (found["name"], found["email"]) if found else None


def commit_identity(client: GitHubClient | None, settings: GitHubSettings) -> tuple[str, str]:
    """The name and address worker's commits for GitHub's tasks carry."""
    if settings.commit_author:
        given = parse_author(settings.commit_author)
        if given is not None:
            return given
    if client is None:
        return BOT_IDENTITY
    try:
        user = client.get("/user", cache_key="user").data
    except GitHubError as exc:
        log.warning("github: cannot read the token's user for the commit author: %s", exc)
        return BOT_IDENTITY
    login, ident = (user or {}).get("login"), (user or {}).get("id")
    if not isinstance(login, str) or not login or not str(ident).isdigit():
        return BOT_IDENTITY
    return login, f"{ident}+{login}@users.noreply.{_noreply_host(settings)}"


def _noreply_host(settings: GitHubSettings) -> str:
    """github.com for the public API, else the Enterprise server's host."""
    host = urlsplit(settings.base_url).hostname or "github.com"
    return "github.com" if host == "api.github.com" else host


def pull_request_body(
    number: int | str, task_id: str, result: TaskResult | None, changed: str
) -> str:
    """What the pull request says: the agent's summary, the files, the cost, `Closes #N`."""
    parts = []
    if result is not None and result.reason:
        parts.append(f"**Summary:** {_plain(result.reason, 1500)}")
    if result is not None and result.final_text.strip():
        said = _plain(result.final_text.strip()[-SUMMARY_CAP:], SUMMARY_CAP)
        parts.append("**What the agent did and how it checked it:**\n\n" + _quoted(said))
    if changed.strip():
        parts.append("**Files changed:**\n\n```text\n" + _plain(changed, 3000) + "\n```")
    if result is not None:
        parts.append(
            f"**Cost:** ${result.cost_usd:.4f} over {len(result.iterations)} iteration(s) "
            f"({' -> '.join(result.modes) or '-'})."
        )
    parts.append(f"Closes #{number}\n\n_Opened by worker for {task_id}._")
    return "\n\n".join(parts)


def _plain(text: str, cap: int) -> str:
    return redact(text)[:cap].replace("<!--", "&lt;!--").replace("```", "ʼʼʼ")


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}" for line in text.splitlines())
