"""The task sources of a run, in priority order: inbox, GitHub (when configured), fallback."""

from __future__ import annotations

from worker.config import Settings
from worker.sources.base import TaskSource
from worker.sources.fallback import FallbackSource
from worker.sources.inbox import InboxSource
from worker.state.store import Store


def build_sources(
    settings: Settings,
    store: Store | None,
    *,
    dry_run: bool = False,
    fallback_last_run: float | None = None,
    open_pr: bool | None = None,
) -> list[TaskSource]:
    sources: list[TaskSource] = [InboxSource(settings, store, dry_run=dry_run)]
    if settings.github.repos:
        from worker.sources.github.source import GitHubSource  # PyGithub is heavy: only when used

        sources.append(GitHubSource(settings, store, dry_run=dry_run, open_pr=open_pr))
    sources.append(FallbackSource(settings, store, fallback_last_run))
    return sources
