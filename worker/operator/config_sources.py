"""Where each setting came from, for `worker doctor`: the files in the order they are read
and every key given, with its value (secrets masked) and its origin."""

from __future__ import annotations

from typing import Any

from worker.config import Settings
from worker.config_load import dotted
from worker.process.proc import redact

_SHOWN = 80  # characters of a value


def layers_line(settings: Settings) -> str:
    """`defaults < user file ~/.config/worker/config.toml (none) < ... < command line`."""
    sources = settings.sources
    files = sources.files if sources is not None else ()
    read = [f"{layer} {path}" + ("" if there else " (none)") for layer, path, there in files]
    return " < ".join(["defaults", *read, "WORKER_* variables", "command line"])


def given(settings: Settings) -> list[str]:
    """`machine_id = box-1 (from /home/u/.config/worker/config.toml)`, one per key given."""
    sources = settings.sources
    if sources is None:
        return []
    return [
        f"{dotted(key)} = {_shown(_value_at(settings, key))} (from {origin})"
        for key, origin in sources.given()
    ]


def _value_at(settings: Settings, key: tuple[str, ...]) -> Any:
    value: Any = settings
    for part in key:
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    return value


def _shown(value: Any) -> str:
    text = redact(str(value))
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"
