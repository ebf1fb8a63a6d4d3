"""Hunted configuration bugs: a `worker.toml` as Windows tools save it is read."""

from __future__ import annotations

from pathlib import Path

from worker.config import load_settings


def test_a_worker_toml_saved_with_a_utf8_byte_order_mark_is_read(workspace: Path) -> None:
    """Notepad (before Windows 10 1903) and PowerShell 5's `Set-Content -Encoding UTF8` start
    the file with a byte order mark; TOML's parser alone reports "Invalid statement (at line
    1, column 1)" for it, a line that looks right."""
    (workspace / "worker.toml").write_bytes(b"\xef\xbb\xbflease_seconds = 1234\n")
    assert load_settings(workspace).lease_seconds == 1234
