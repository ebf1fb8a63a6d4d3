"""Notifications: a Telegram bot and a generic webhook, fed from an outbox in SQLite, and
commands read back from Telegram (`/approve`, `/reject`, `/status`, `/cancel`).

`settings` is imported by the configuration; everything else loads when it is used.
"""
