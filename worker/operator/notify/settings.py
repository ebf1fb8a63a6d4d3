"""Settings of notifications (section `[notify]`): a Telegram bot and a generic webhook."""

# Annotations evaluated as written, not postponed: worker/config.py says why.

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat

Event = Literal[
    "needs_approval",
    "failed",
    "done",
    "crash_loop",
    "daily_budget",
    # a pull request's moments (worker/operator/notify/moments.py)
    "pr_opened",
    "pr_ready",
    "pr_checks_failed",
    "pr_merged",
    "pr_closed",
]
# Every event but `done` (a task's end is in `worker log`; its pull request's merge is told).
DEFAULT_EVENTS: tuple[Event, ...] = tuple(e for e in get_args(Event) if e != "done")


class TelegramSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    # The bot token is read from this environment variable when used, never stored or logged.
    token_env: str = "TELEGRAM_BOT_TOKEN"
    # Notifications go to these chats, and commands are obeyed from these chats only.
    # `[]`, not `default_factory=list` (worker/config.py says why)
    chat_ids: list[int] = []
    api_base: str = Field("https://api.telegram.org", pattern=r"^https?://")
    # Long polling during `worker serve` (Telegram's own examples use 25-30 s).
    poll_timeout_s: int = Field(25, ge=0, le=50)


class WebhookSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    # e.g. https://ntfy.sh/ (with `topic`) or a Slack incoming-webhook URL
    url: str | None = Field(None, pattern=r"^https?://")
    topic: str | None = None  # ntfy's topic when the URL is the server's root


class NotifySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True, allow_inf_nan=False)  # config.py

    events: list[Event] = Field(default_factory=lambda: list(DEFAULT_EVENTS))
    telegram: TelegramSettings = Field(default_factory=dict, validate_default=True)
    webhook: WebhookSettings = Field(default_factory=dict, validate_default=True)
    # A dead-man's switch (healthchecks.io, Cronitor, Uptime Kuma push): pinged once at the end
    # of every run, `/fail` on failure; `/start` at its start too with heartbeat_start, which
    # lets healthchecks.io time each run (worker/operator/heartbeat.py).
    heartbeat_url: str | None = Field(None, pattern=r"^https?://")
    heartbeat_start: bool = False
    send_timeout_s: PositiveFloat = 10.0
    max_attempts: int = Field(20, ge=1)  # then the notification is given up (still listed)


def telegram_configured(settings: NotifySettings) -> bool:
    """A chat is listed, or `[notify.telegram]` is in the configuration (chats to come: the
    bot reads its messages and logs each chat's id with the line that allows it)."""
    return bool(settings.telegram.chat_ids) or "telegram" in settings.model_fields_set
