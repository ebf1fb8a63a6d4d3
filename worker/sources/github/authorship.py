"""Who worker's commits are by, and what its pull requests say.

The author is `[github] commit_author` when set, else the token's own user with GitHub's
`noreply` address (`ID+login@users.noreply.github.com`: the commit is linked to that account,
no mail address is published), else a bot name with an address that reaches nobody. The pull
request's body is the agent's own summary (what changed, why, how it was checked), the files
changed, the cost, and `Closes #N`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from worker.models import Outcome, Task, TaskResult
from worker.process.gitview import main_checkout, run_git
from worker.process.proc import redact
from worker.process.workspace_git import BOT_IDENTITY
from worker.sources.github.claims import create_once
from worker.sources.github.client import GitHubClient, GitHubError
from worker.sources.github.settings import GitHubSettings, next_round

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


# The paragraphs of a round's answer that name what was asked (worker/waits/github_pr.py).
_ASKED = ("Review by ", "Comment by ", "These checks failed", "The pull request conflicts")


def round_reply(marker: str, result: TaskResult, rounds: int) -> str:
    """worker's reply on the pull request after a round of fixes: what changed, and which
    reviews, comments and checks it answered."""
    lines = [marker, f"🤖 worker pushed round {rounds} of fixes to this pull request."]
    if result.reason:
        lines += ["", f"**What changed:** {_plain(result.reason, 1000)}"]
    asked = [
        _plain(part.strip().splitlines()[0].rstrip(":"), 200) + _first_line_after(part)
        for part in result.answered.split("\n\n")
        if part.strip().startswith(_ASKED)
    ]
    if asked:
        lines += ["", "**It addressed:**", *(f"- {item}" for item in asked[:10])]
    lines += ["", f"Cost of the round: ${result.cost_usd:.4f} in all so far."]
    return "\n".join(lines)


def _first_line_after(part: str) -> str:
    rest = [line.strip() for line in part.strip().splitlines()[1:] if line.strip()]
    return f": {_plain(rest[0], 200)}" if rest else ""


def question(result: TaskResult) -> list[str]:
    """The agent's question when it waits for a person, in the open in the status comment
    (not in the collapsed last words), with how to answer it."""
    if result.outcome is not Outcome.WAITING or "AGENT_WAIT" not in result.reason_codes:
        return []
    data: dict[str, Any] = {}
    if result.wait_state is not None:  # worker's own file, in its state folder
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(Path(result.wait_state).read_text(encoding="utf-8"))
    asked = str(data.get("waitFor") or result.reason or "a person's decision")
    when = str(data.get("resumeWhen") or "user_approval")
    how = (
        "**To answer:** comment `/approve` on this issue to let the agent go on (the words "
        "after it reach the agent, e.g. `/approve use the v2 API`), or `/reject` to stop it."
        if when == "user_approval"
        else f"It resumes by itself when: `{when}`."
    )
    return [f"❓ **The agent asks:** {asked}", how]


def reply_on_pull(client: GitHubClient, task: Task, result: TaskResult) -> None:
    """A short reply on the pull request after a round of fixes (once per round, a retried
    report finds it), saying what changed and what it answered."""
    assert result.pull_request is not None
    repo, rounds = task.ref["repo"], next_round(task.ref)
    path = f"/repos/{repo}/issues/{result.pull_request['number']}/comments"
    mark = f"<!-- worker:round task={task.id} round={rounds} -->"

    def find() -> dict[str, Any] | None:
        found = client.paginate(path)
        return next((c for c in found if str(c.get("body", "")).startswith(mark)), None)

    try:
        if find() is None:
            create_once(client, ("POST", path, {"body": round_reply(mark, result, rounds)}), find)
    except Exception as exc:  # a courtesy: the push and the status comment stand
        log.warning("could not reply on the pull request of %s: %s", task.id, exc)


def changed_files(workspace: Path, remote: str, base: str, branch: str) -> str:
    """`git diff --stat` of the branch against its base (the remote's, else the local one),
    through worker's view of the repository (no program of its configuration runs)."""
    checkout = main_checkout(workspace)
    if checkout is None:
        return ""
    refs = [base] if "/" in remote or ":" in remote else [f"{remote}/{base}", base]
    for ref in refs:
        found = run_git(
            checkout,
            "diff",
            "--stat",
            "--no-ext-diff",
            "--no-textconv",
            "--end-of-options",
            f"{ref}...{branch}",
        )
        if found.exit_code == 0:
            return found.stdout
    return ""
