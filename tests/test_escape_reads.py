"""Reads refused in the box (issue 38, point 5), each attack a test of its own with bubblewrap
alone and with srt: the stand-in agent tries it inside the box and the test looks for the
marker outside. The places attacked live outside /tmp (tests/escape_support.py says why); the
control at the end runs the same reads unboxed, where each one works."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.escape_support import RUNTIMES, attack, box_home, outside_tmp, use_runtime
from tests.sandbox_support import listener
from tests.test_sandbox import bwrap_works
from worker.cli.app import app
from worker.config import load_settings
from worker.process.gitsafe import push_credentials
from worker.sandbox.box import Runtime, Sandbox
from worker.state.statedir import state_home

__all__ = ["box_home", "outside_tmp"]  # fixtures

MARKER = "MARKER-" + uuid.uuid4().hex[:12]
PLACES = ["another workspace's state", "worker's user config", "~/.pgpass"]


def plant(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{MARKER}\n")
    return path


def worker_places(home: Path) -> dict[str, Path]:
    """worker's own files an agent must not read: another workspace's state folder, the user
    configuration folder (the printed unit's env file), PostgreSQL's password file."""
    return {
        "another workspace's state": state_home() / "other-ws-1234abcd" / "worker.db",
        "worker's user config": home / ".config" / "worker" / "env",
        "~/.pgpass": home / ".pgpass",
    }


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize(
    "place", ["another workspace's state", "worker's user config", "~/.pgpass"]
)
def test_worker_own_files_are_not_readable_in_the_box(
    runtime: str,
    place: str,
    workspace: Path,
    box_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent `cat`s one of worker's files by its path: the box refuses it."""
    path = plant(worker_places(box_home)[place])
    use_runtime(runtime, monkeypatch, tmp_path)
    out = attack(workspace, f"cat {path}; ls {path.parent}", runtime)
    assert MARKER not in out and path.name not in out.replace(str(path), "")


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_file_the_environment_names_as_a_token_file_is_not_readable(
    runtime: str,
    workspace: Path,
    box_home: Path,
    outside_tmp: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MY_API_TOKEN_FILE names where a token is kept (as `*_TOKEN_FILE` variables do): the
    agent reads that path and gets nothing."""
    path = plant(outside_tmp / "secrets" / "api-token")
    monkeypatch.setenv("MY_API_TOKEN_FILE", str(path))
    use_runtime(runtime, monkeypatch, tmp_path)
    assert MARKER not in attack(workspace, f"cat {path}", runtime)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_push_token_file_is_neither_in_the_shared_tmp_nor_readable(
    runtime: str, workspace: Path, box_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a push's one-shot credential exists, its token file is under worker's state
    home (never the shared /tmp), and an agent that knows its path reads nothing."""
    use_runtime(runtime, monkeypatch, tmp_path)
    with push_credentials(MARKER, "github.com") as config:
        token = Path(config[-1].split("=", 1)[1]).parent / "token"
        assert token.exists() and state_home() in token.parents
        assert Path(tempfile.gettempdir()) not in token.parents
        assert MARKER not in attack(workspace, f"cat {token}; ls {token.parent}", runtime)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_shared_tmp_is_private_in_the_box(
    runtime: str, workspace: Path, box_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file another program left in /tmp is not there in the box, and what the agent writes
    in /tmp stays in the box; its TMPDIR works."""
    shared = plant(tmp_path / "left-by-another-program.txt")
    dropped = Path("/tmp") / f"worker-escape-{uuid.uuid4().hex}"
    use_runtime(runtime, monkeypatch, tmp_path)
    try:
        out = attack(
            workspace,
            f'cat {shared}; echo pwned > {dropped}; touch "$TMPDIR/x" && echo tmpdir-ok',
            runtime,
        )
        assert MARKER not in out and "tmpdir-ok" in out
        assert not dropped.exists()
    finally:
        dropped.unlink(missing_ok=True)


def connect(path: Path) -> str:
    code = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({str(path)!r})"
    return f'{sys.executable} -c "{code}" && echo connected'


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_ssh_agents_socket_is_out_of_reach(
    runtime: str, workspace: Path, box_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ssh-agent's socket (in /tmp, named by SSH_AUTH_SOCK): the agent can neither learn nor
    reach it."""
    path = tmp_path / "agent.sock"
    monkeypatch.setenv("SSH_AUTH_SOCK", str(path))
    use_runtime(runtime, monkeypatch, tmp_path)
    with listener(unix=path) as (_, got):
        out = attack(workspace, f'echo "sock=$SSH_AUTH_SOCK"; {connect(path)}', runtime)
    assert got == [] and "connected" not in out and str(path) not in out.split("sock=")[1]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_sockets_under_run_are_out_of_reach(
    runtime: str, workspace: Path, box_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A socket under /run (where D-Bus's session bus, PostgreSQL's and docker's live): /run
    is empty in the box."""
    folder = Path("/run") / f"worker-escape-{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a folder under /run as this user: {exc}")
    use_runtime(runtime, monkeypatch, tmp_path)
    try:
        with listener(unix=folder / "bus") as (_, got):
            out = attack(workspace, f"ls /run; {connect(folder / 'bus')}", runtime)
        assert got == [] and "connected" not in out and folder.name not in out
    finally:
        folder.rmdir()


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_no_capability_in_the_box_even_as_root(
    runtime: str, workspace: Path, box_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`umount` of a hidden folder and `mount -o remount,rw /` fail in the box (as root too:
    CI's case): the key behind the hidden ~/.ssh stays unread, the system stays read-only."""
    plant(box_home / ".ssh" / "id_ed25519")
    probe = Path("/etc") / f"worker-escape-{uuid.uuid4().hex[:8]}"
    use_runtime(runtime, monkeypatch, tmp_path)
    try:
        out = attack(
            workspace,
            f"umount {box_home / '.ssh'}; cat {box_home / '.ssh' / 'id_ed25519'}; "
            f"mount -o remount,rw /; echo pwned > {probe}; grep CapEff /proc/self/status",
            runtime,
        )
        assert MARKER not in out and not probe.exists()
        if runtime == "bwrap":  # --cap-drop ALL; srt's command holds a set inside a user
            # namespace of its own, where its seccomp filter refuses every mount call
            assert "CapEff:\t0000000000000000" in out
    finally:
        probe.unlink(missing_ok=True)


def test_the_control_unboxed_every_read_works(
    workspace: Path, box_home: Path, outside_tmp: Path
) -> None:
    """The same reads with the box off: each file is read, so the tests above can fail."""
    paths = [plant(p) for p in worker_places(box_home).values()]
    out = attack(workspace, "; ".join(f"cat {p}" for p in paths), None)
    assert out.count(MARKER) == len(paths)
    assert load_settings(workspace).state.parent == state_home()
    assert os.environ["HOME"] == str(box_home)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_doctor_says_what_the_box_enforces_and_what_not_per_runtime(
    runtime: str, workspace: Path, box_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`worker doctor` names every rule the box holds with this runtime (reads refused for the
    whole state home, worker's config and ~/.pgpass; /tmp and /run empty; the environment by
    allow-list; capabilities) and what it leaves open (bubblewrap alone: the network)."""
    use_runtime(runtime, monkeypatch, tmp_path)
    done = CliRunner().invoke(app, ["doctor", "--json", "-w", str(workspace)])
    said = [f["message"] for f in json.loads(done.stdout)["findings"] if f["check"] == "sandbox"]
    enforced, open_, _ = said
    for rule in ("/tmp and /run empty", "environment by allow-list", "capabilities: "):
        assert rule in enforced
    for place in (state_home(), box_home / ".config" / "worker", box_home / ".pgpass"):
        assert str(place) in enforced
    assert enforced.startswith(f"agents run in {runtime}")
    assert open_.startswith("not enforced: ")
    if runtime == "bwrap":
        assert "network: NOT limited" in enforced and "any host is reachable" in open_
    else:
        assert "network: only the model's API host" in enforced and "srt's proxy" in open_


def test_as_a_plain_user_the_box_holds_the_same(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI runs as root; a user runs worker as themselves. Run as root, this test starts the
    box worker builds (bubblewrap alone) as `nobody` (setpriv): the key in the hidden ~/.ssh,
    the other workspace's state, ~/.pgpass and a file in the shared /tmp stay unread, the
    system read-only, the tree writable. Run as a plain user, every test above is this one."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to become another user (the suite is that user)")
    bwrap_works()
    base = Path(tempfile.mkdtemp(prefix="escape-plain-"))  # in /tmp: `nobody` can enter it
    try:
        base.chmod(0o755)
        home, tree = base / "home", base / "tree"
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("XDG_STATE_HOME", str(base / "state"))
        places = [
            plant(home / ".ssh" / "id_ed25519"),
            plant(home / ".pgpass"),
            plant(state_home() / "other-ws-1234abcd" / "worker.db"),
            plant(tmp_path / "shared.txt"),
        ]
        tree.mkdir()
        for path in [base, *base.rglob("*")]:
            path.chmod(0o777 if path.is_dir() else 0o644)  # readable to `nobody` unboxed
        (tree / "worker.toml").write_text('[sandbox]\nruntime = "bwrap"\n')
        settings = load_settings(tree)
        box = Sandbox(settings, "command", Runtime("bwrap", shutil.which("bwrap") or "bwrap"))
        script = "; ".join(f"cat {p}" for p in places)
        script += f"; echo pwned > /etc/{base.name}; echo ok > {tree}/written; id -u"
        with box.launch(["sh", "-c", script], tree) as (argv, env):
            for folder in (Path(env["TMPDIR"]), Path(env["TMPDIR"]).parent):
                folder.chmod(0o777)  # the box's private tmp, made by root: `nobody`'s here
            user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            done = subprocess.run(
                [*user, *argv], cwd=tree, env=env, capture_output=True, text=True, check=False
            )
        said = done.stdout + done.stderr
        assert "65534" in said and (tree / "written").read_text() == "ok\n", said
        assert MARKER not in said and not Path("/etc", base.name).exists()
    finally:
        Path("/etc", base.name).unlink(missing_ok=True)
        shutil.rmtree(base, ignore_errors=True)
