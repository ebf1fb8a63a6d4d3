"""A real, throwaway PostgreSQL cluster for the fleet tests.

`initdb` and `pg_ctl` from the system's packages (Debian keeps them in
`/usr/lib/postgresql/<version>/bin`) build a cluster in a temporary folder, listening on
127.0.0.1 on a free port; the superuser has a password, so the tests go through real password
authentication. PostgreSQL refuses to run as root: as root (CI, containers) the cluster runs as
the `postgres` user through `runuser`. Where no `pg_ctl` exists the tests skip, saying why.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PASSWORD = "s3cret-" + uuid.uuid4().hex[:12]  # a fresh secret each session, searched for in output


def find_bin(name: str) -> Path | None:
    """`name` on PATH, else in the newest `/usr/lib/postgresql/<version>/bin`."""
    found = shutil.which(name)
    if found:
        return Path(found)
    root = Path("/usr/lib/postgresql")
    versions = sorted(
        (p for p in root.glob("*/bin") if (p / name).exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    return versions[-1] / name if versions else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PgCluster:
    bin_dir: Path
    root: Path
    port: int
    user: str | None  # run the server as this user (when the tests run as root)

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres", password: str = PASSWORD) -> str:
        return f"postgresql://postgres:{password}@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        cmd = [str(self.bin_dir / args[0]), *args[1:]]
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)

    def init(self) -> None:
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n", encoding="utf-8")
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            for path in (self.root, pwfile):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--pwfile", str(pwfile),
            "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        pwfile.unlink()

    def start(self) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port}"
            f" -c unix_socket_directories={self.root} -c fsync=off -c max_connections=200"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"),
            "-o", options, "-w", "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self) -> None:
        self.stop()
        self.start()

    def create_database(self) -> str:
        """A fresh, empty database; its URL (with the password)."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)


def _server_user() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and there is no `postgres` user to run PostgreSQL as")
    return "postgres"


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """One PostgreSQL server for the session, torn down at the end."""
    pg_ctl = find_bin("pg_ctl")
    if pg_ctl is None or not (pg_ctl.resolve().parent / "initdb").exists():
        reason = "no pg_ctl (with initdb beside it) found: install Debian's `postgresql`"
        if os.environ.get("FLEET_PG_REQUIRED"):  # CI: these tests must run
            pytest.fail(reason)
        pytest.skip(reason)
    pytest.importorskip("psycopg", reason="psycopg is not installed: pip install -e '.[test]'")
    user = _server_user()
    # Not under pytest's tmp folder: that one is private to the user running the tests.
    root = Path(tempfile.mkdtemp(prefix="worker-pg-"))
    cluster = PgCluster(pg_ctl.resolve().parent, root, _free_port(), user)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # not running: nothing to stop
            cluster.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> str:
    """A fresh database of the session's cluster, for one test."""
    return pg_cluster.create_database()
