"""`worker doctor`'s look at notifications: for every configured channel, whether it can send
now and from a scheduled run.

Telegram: its token variable is set here, the bot answers `getMe` with it, each installed
schedule of this workspace starts with it (cron's and systemd's environment, as
`worker.process.platform.installed` rebuilds it), and chats are listed (or how to find their
ids: the bot logs any chat that writes to it). The webhook: its host, never its URL (a Slack
webhook's path is its secret).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from worker.config import Settings
from worker.operator.notify.channels import Bot, SendError
from worker.operator.notify.settings import telegram_configured
from worker.process.platform.installed import scheduled_jobs

Said = tuple[str, str]  # (ok | warn | fail, what to know or fix)


def describe(settings: Settings, env: Mapping[str, str]) -> Iterator[Said]:
    """What is configured and what is missing, channel by channel."""
    cfg = settings.notify
    if not telegram_configured(cfg) and not cfg.webhook.url:
        yield (
            "ok",
            "no notifications configured: add [notify.telegram] or [notify.webhook] to be told "
            "when a task needs a person, fails, or its pull request opens or merges",
        )
        return
    yield "ok", "told: " + ", ".join(cfg.events)
    if telegram_configured(cfg):
        yield from _telegram(settings, env)
    if cfg.webhook.url:
        host = urlsplit(cfg.webhook.url).hostname or "?"
        yield "ok", f"webhook: each notification is posted to {host}"


def _telegram(settings: Settings, env: Mapping[str, str]) -> Iterator[Said]:
    tg = settings.notify.telegram
    token = env.get(tg.token_env, "").strip()
    if not token:
        yield (
            "fail",
            f"Telegram is configured but {tg.token_env} is not set here: export the bot's "
            "token (from @BotFather) in this variable",
        )
    else:
        yield _bot_answers(Bot(tg.api_base, token, settings.notify.send_timeout_s))
    yield from _scheduled(settings, env, tg.token_env)
    if tg.chat_ids:
        yield "ok", f"Telegram chats: {', '.join(str(c) for c in tg.chat_ids)}"
    else:
        yield (
            "warn",
            "no Telegram chat listed yet, so nothing is sent: send the bot a message; the next "
            "run logs that chat's id with the line to add under [notify.telegram] "
            "(chat_ids = [ID])",
        )


def _bot_answers(bot: Bot) -> Said:
    try:
        me = bot.call("getMe", {})
    except SendError as exc:
        return "fail", f"the Telegram bot token does not work: {exc}"
    name = me.get("username") if isinstance(me, dict) else None
    return "ok", f"the Telegram bot answers (@{name or '?'})"


def _scheduled(settings: Settings, env: Mapping[str, str], variable: str) -> Iterator[Said]:
    """Each installed schedule of this workspace starts with the token, or cron's runs are
    never notified (cron and systemd start with their own environment, not this shell's)."""
    home = Path(env.get("HOME") or Path.home())
    jobs = [
        job
        for job in scheduled_jobs(env, home)
        if (home / job.workspace).resolve() == settings.workspace
    ]
    for job in jobs:
        if job.env.get(variable, "").strip():
            yield "ok", f"{job.where} starts with {variable}"
        else:
            how = _where_to_put(job.kind, variable)
            yield "fail", f"{job.where} starts without {variable}: {how}"
    if not jobs:
        yield "ok", f"a scheduled run needs {variable} too: {_where_to_put('either', variable)}"


def _where_to_put(kind: str, variable: str) -> str:
    cron = f"a `{variable}=...` line above worker's line in the crontab (crontab -e)"
    systemd = f"a `{variable}=...` line in {os.path.join('~', '.config', 'worker', 'env')}"
    if kind == "cron":
        return f"add {cron}"
    if kind == "systemd":
        return f"add {systemd} (the unit's EnvironmentFile)"
    return f"{cron}, or {systemd} for systemd"
