"""`worker doctor`'s check of GitHub: with repositories configured, a token is set and works,
and it may push to each repository.
"""

from __future__ import annotations

from collections.abc import Iterable

from worker.operator.doctor_findings import Context, Finding, Status
from worker.sources.github.client import GitHubClient, make_client
from worker.sources.github.http import TOKEN_VARIABLES, GitHubError, token_from_env

_STRONG_ENOUGH = ("admin", "maintain", "push")


def check_github(context: Context) -> Iterable[Finding]:
    github = context.settings.github
    if not github.repos:
        yield Finding("github", Status.OK, "no repositories configured: the GitHub source is off")
        return
    token = token_from_env(dict(context.env))
    if token is None:
        names = " or ".join(TOKEN_VARIABLES)
        yield Finding(
            "github", Status.FAIL, f"{len(github.repos)} repositories but no token: set {names}"
        )
        return
    client = make_client(github, None, token)
    try:
        user = client.request("GET", "/user", retry=False).data
        login = user.get("login") if isinstance(user, dict) else None
    except GitHubError as exc:
        yield Finding("github", Status.FAIL, f"the GitHub token does not work: {exc}")
        return
    yield Finding("github", Status.OK, f"the token works (user {login}) at {github.base_url}")
    for repo in github.repos:
        yield _repo_permission(client, repo, login)


def _repo_permission(client: GitHubClient, repo: str, login: str | None) -> Finding:
    try:
        data = client.request("GET", f"/repos/{repo}", retry=False).data
    except GitHubError as exc:
        return Finding(
            "github",
            Status.FAIL,
            f"{repo}: not readable with this token ({exc}): check the name and the token's access",
        )
    permissions = data.get("permissions") if isinstance(data, dict) else None
    granted = [name for name, on in (permissions or {}).items() if on]
    strongest = next((name for name in _STRONG_ENOUGH if name in granted), None)
    if strongest is None:
        return Finding(
            "github",
            Status.WARN,
            f"{repo}: {login} has {', '.join(granted) or 'no listed'} permission; worker labels "
            "issues and pushes branches, which needs push (write) access",
        )
    return Finding("github", Status.OK, f"{repo}: {login} has {strongest} permission")
