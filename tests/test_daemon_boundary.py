"""The supervisor is the control plane only: checked, not assumed.

`worker supervise` runs through the real CLI in a real process with a Python audit hook that
logs every file it opens and every folder it lists; the test then proves that none of them is
the inbox, a wait state, a report, the modes or a prompt, and that the data plane's modules were
never imported into that process.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.conftest import needs_posix, state_of, write_message
from tests.test_daemon_support import Repo, child_script, settings_for

_AUDITED = """
import os, sys, atexit
ws, log = sys.argv[1], sys.argv[2]
fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # before the hook: unlogged

def hook(event, args):
    if event in ("open", "os.listdir", "os.scandir", "sqlite3.connect") and args:
        path = args[0]
        if isinstance(path, (str, bytes, os.PathLike)):
            os.write(fd, (event + "\\t" + os.fsdecode(path) + "\\n").encode())

def modules():
    names = ",".join(sorted(m for m in sys.modules if m.startswith("worker")))
    os.write(fd, ("modules\\t" + names + "\\n").encode())

sys.addaudithook(hook)
atexit.register(modules)
sys.argv = ["worker", "supervise", "--workspace", ws]
from worker.cli.app import main
main()
"""

_SECRET = "the-launch-codes-are-0000"
_DATA_PLANE = (
    "worker.run.runner",
    "worker.run.loop",
    "worker.run.prompt",
    "worker.sources.inbox",
    "worker.agents",
    "worker.waits.state",
    "worker.review.hooks",
)


@needs_posix("sends SIGTERM; on Windows send_signal(SIGTERM) terminates outright")
def test_supervisor_never_opens_the_inbox_or_prompts(workspace: Path, tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo")
    repo.commit({"child.py": child_script("healthy")})
    settings = settings_for(workspace, repo, stable_window_s=0.2)
    write_message(workspace, "msg-1", body=_SECRET)
    (workspace / "wait_states").mkdir()
    (workspace / "wait_states" / "w1.json").write_text(f'{{"note": "{_SECRET}"}}')
    (state_of(workspace) / "prompts").mkdir(parents=True)
    (state_of(workspace) / "prompts" / "p1.md").write_text(_SECRET)
    script, log = tmp_path / "audited.py", tmp_path / "audit.log"
    script.write_text(textwrap.dedent(_AUDITED), encoding="utf-8")

    proc = subprocess.Popen(
        [sys.executable, str(script), str(workspace), str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_until_promoted(settings.db_path, proc)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err

    lines = [line.split("\t", 1) for line in log.read_text().splitlines()]
    touched = [Path(path) for kind, path in lines if kind != "modules"]
    assert any(p.name == "worker.db" for p in touched)  # the hook did see the supervisor work
    forbidden = [
        workspace / "inbox",
        workspace / "wait_states",
        workspace / "modes",
        settings.reports,
        state_of(workspace) / "prompts",
    ]
    package = Path(__file__).resolve().parents[1] / "worker"
    for path in touched:
        absolute = path if path.is_absolute() else workspace / path
        assert not any(absolute.is_relative_to(f) for f in forbidden), path
        if not (
            absolute.is_relative_to(package)
            or absolute.is_relative_to(sys.base_prefix)
            or absolute.is_relative_to(sys.prefix)
        ):
            assert "prompt" not in absolute.name.lower(), path
    imported = next(path for kind, path in lines if kind == "modules").split(",")
    assert not [m for m in imported if m.startswith(_DATA_PLANE)]

    # And nothing the supervisor stored holds message content.
    with sqlite3.connect(settings.db_path) as db:
        rows = [
            *db.execute("SELECT * FROM supervisor_events"),
            *db.execute("SELECT * FROM supervisor_revisions"),
            *db.execute("SELECT * FROM supervisor_state"),
            *db.execute("SELECT * FROM kv WHERE key LIKE 'supervise.%'"),
        ]
    assert rows and _SECRET not in repr(rows)


def test_supervisor_modules_do_not_import_the_data_plane() -> None:
    """A fresh interpreter importing everything `worker supervise` uses."""
    code = (
        "import sys, worker.cli.supervise, worker.daemon.supervisor, worker.daemon.status;"
        "print('\\n'.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ}
    ).stdout.split()
    assert not [m for m in out if m.startswith(_DATA_PLANE)]


def _wait_until_promoted(db_path: Path, proc: subprocess.Popen[str]) -> None:
    for _ in range(6000):  # a budget against hangs, not a timing assertion
        if proc.poll() is not None:
            break
        if db_path.exists():
            with sqlite3.connect(db_path) as db:
                try:
                    found = db.execute(
                        "SELECT 1 FROM supervisor_events WHERE kind = 'promote'"
                    ).fetchone()
                except sqlite3.OperationalError:  # tables not there yet
                    found = None
            if found:
                return
        time.sleep(0.02)
    raise AssertionError(proc.stderr.read() if proc.stderr else "supervisor never promoted")
