"""`worker supervise` end to end: real child processes, real git revisions, small time settings.

Each test drives a Supervisor until a condition holds (the `until` hook), then reads the SQLite
state it left behind. Nothing asserts how long anything took.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tests.conftest import state_of
from tests.test_daemon_support import Repo, child_script, kinds, settings_for, until
from worker.daemon import health, revisions
from worker.daemon.state import SupervisorState
from worker.daemon.supervisor import Supervisor
from worker.state.store import Store


def _state(ws: Path) -> SupervisorState:
    return SupervisorState(Store(state_of(ws) / "worker.db"))


def test_a_crashing_child_is_restarted_with_growing_delays(workspace: Path) -> None:
    """Unversioned mode: a child that keeps dying is restarted after 1x, 2x, 4x, ... the base."""
    (workspace / "child.py").write_text(child_script("crash"), encoding="utf-8")
    settings = settings_for(workspace, crash_loop_count=50, backoff_base_s=0.01, backoff_cap_s=10)
    sup = Supervisor(
        settings,
        rng=random.Random(7),
        until=until(lambda s: kinds(s).count("restart_scheduled") >= 5),
    )
    report = sup.run()
    events = _state(workspace).events(500)
    delays = [e["delay_s"] for e in events if e["kind"] == "restart_scheduled"][:5]
    assert report.exit_code == 0
    assert len(delays) == 5
    assert delays == sorted(delays) and len(set(delays)) == 5  # strictly growing
    for n, delay in enumerate(delays):
        nominal = 0.01 * 2**n
        assert nominal * 0.9 <= delay <= nominal  # jitter only shortens, by 10 % at most
    exits = [e for e in events if e["kind"] == "exit"]
    assert {e["exit_code"] for e in exits} == {3}
    assert all(e["revision"] is None for e in exits)


def test_crash_loop_without_a_good_revision_gives_up_with_exit_1(workspace: Path) -> None:
    """Nothing to roll back to: the supervisor escalates (systemd/cron decide) instead of
    restarting for ever."""
    (workspace / "child.py").write_text(child_script("crash"), encoding="utf-8")
    report = Supervisor(settings_for(workspace), until=until(lambda s: False)).run()
    assert report.exit_code == 1
    assert report.reason.startswith("crash loop: 3 crashes")
    state = _state(workspace)
    assert kinds(state.events()).count("exit") == 3
    assert state.snapshot().last_failure_reason == report.reason


def test_healthy_revision_is_promoted_and_state_survives_a_supervisor_restart(
    workspace: Path, tmp_path: Path
) -> None:
    """The first revision becomes current_good_rev after the stable window; a new supervisor
    process (same database) starts that revision directly: no new candidate, no rebuild."""
    repo = Repo(tmp_path / "repo")
    rev_a = repo.commit({"child.py": child_script("healthy"), "build.py": _counting_build()}, "A")
    settings = settings_for(workspace, repo, build_command=["{python}", "build.py", "{workspace}"])
    first = Supervisor(settings, until=until(lambda s: s.good == rev_a))
    assert first.run().current_good_rev == rev_a
    state = _state(workspace)
    assert state.snapshot().current_good_rev == rev_a
    assert state.snapshot().candidate_rev is None
    row = state.revision(rev_a)
    assert row is not None
    assert (row["build_ok"], row["health_ok"]) == (1, 1) and row["promoted_at"]
    assert kinds(state.events()) == [
        "supervisor_start",
        "candidate",
        "start",
        "ready",
        "promote",
        "stop",
    ]

    second = Supervisor(
        settings, until=until(lambda s: s.running is not None and s.running.ready_at is not None)
    )
    second.run()
    later = kinds(state.events(500))[6:]
    assert later == ["supervisor_start", "start", "ready", "stop"]
    assert state.events(1, kind="start")[0]["revision"] == rev_a
    assert (workspace / "builds.txt").read_text().split() == [rev_a[:7]]  # built once


def test_crash_loop_of_a_candidate_rolls_back_to_the_good_revision(
    workspace: Path, tmp_path: Path
) -> None:
    repo = Repo(tmp_path / "repo")
    rev_a = repo.commit({"child.py": child_script("healthy")}, "A")
    settings = settings_for(workspace, repo)
    Supervisor(settings, until=until(lambda s: s.good == rev_a)).run()

    rev_b = repo.commit({"child.py": child_script("crash")}, "B: broken")
    sup = Supervisor(
        settings,
        until=until(
            lambda s: (
                "rollback" in kinds(s) and s.running is not None and s.running.ready_at is not None
            )
        ),
    )
    report = sup.run()
    state = _state(workspace)
    snap = state.snapshot()
    assert report.current_good_rev == rev_a == snap.current_good_rev
    assert snap.candidate_rev is None
    assert snap.last_failure_reason is not None and "crash loop" in snap.last_failure_reason
    row = state.revision(rev_b)
    assert row is not None
    assert row["build_ok"] == 1 and row["health_ok"] == 0
    assert row["failure_reason"].startswith("crash loop: 3 crashes")
    starts = [e["revision"] for e in state.events(500, kind="start")]
    assert starts[-4:] == [rev_b, rev_b, rev_b, rev_a]  # three tries, then the good one
    # B is never tried again, even by a new supervisor.
    again = Supervisor(
        settings, until=until(lambda s: s.running is not None and s.running.ready_at is not None)
    )
    again.run()
    assert state.events(1, kind="start")[0]["revision"] == rev_a
    assert kinds(state.events(500)).count("candidate") == 2  # A, B once each


def test_a_revision_whose_build_fails_is_never_started(workspace: Path, tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo")
    ok_build = "import sys\nsys.exit(0)\n"
    rev_a = repo.commit({"child.py": child_script("healthy"), "build.py": ok_build}, "A")
    settings = settings_for(workspace, repo, build_command=["{python}", "build.py"])
    Supervisor(settings, until=until(lambda s: s.good == rev_a)).run()

    bad_build = "import sys\nprint('compiling...')\nsys.exit('SyntaxError: invalid syntax')\n"
    rev_c = repo.commit(
        {"child.py": child_script("healthy", marker="started-C"), "build.py": bad_build}, "C"
    )
    sup = Supervisor(settings, until=until(lambda s: "build_failed" in kinds(s)))
    sup.run()
    state = _state(workspace)
    row = state.revision(rev_c)
    assert row is not None
    assert row["build_ok"] == 0 and row["health_ok"] is None
    assert row["failure_reason"] == "build failed (exit 1): SyntaxError: invalid syntax"
    assert rev_c not in [e["revision"] for e in state.events(500, kind="start")]
    assert not (workspace / "started-C").exists()
    assert state.snapshot().current_good_rev == rev_a
    assert state.snapshot().candidate_rev is None
    assert "build failed" in (state.snapshot().last_failure_reason or "")


def test_a_candidate_that_never_becomes_ready_is_rolled_back(
    workspace: Path, tmp_path: Path
) -> None:
    """A start-up limit of 3 s: long enough for a healthy child on a loaded machine (0.5 s
    was not: the good revision itself failed to start in time), short for a test."""
    repo = Repo(tmp_path / "repo")
    rev_a = repo.commit({"child.py": child_script("healthy")}, "A")
    settings = settings_for(workspace, repo, startup_timeout_s=3)
    Supervisor(settings, until=until(lambda s: s.good == rev_a)).run()
    rev_d = repo.commit({"child.py": child_script("never_ready")}, "D: hangs at start")
    Supervisor(settings, until=until(lambda s: "rollback" in kinds(s))).run()
    state = _state(workspace)
    row = state.revision(rev_d)
    assert row is not None and row["health_ok"] == 0
    assert row["failure_reason"] == "not ready within 3 s"
    killed = state.events(1, kind="killed")[0]
    assert killed["revision"] == rev_d and killed["reason"] == "not ready within 3 s"
    assert state.snapshot().current_good_rev == rev_a


def test_a_healthy_candidate_replaces_the_good_revision(workspace: Path, tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo")
    rev_a = repo.commit({"child.py": child_script("healthy")}, "A")
    settings = settings_for(workspace, repo)
    Supervisor(settings, until=until(lambda s: s.good == rev_a)).run()
    rev_e = repo.commit({"child.py": child_script("healthy"), "note.txt": "e"}, "E")
    Supervisor(settings, until=until(lambda s: s.good == rev_e)).run()
    state = _state(workspace)
    assert state.snapshot().current_good_rev == rev_e
    assert [e["revision"] for e in state.events(500, kind="promote")] == [rev_a, rev_e]
    # The snapshot the child ran from is a plain export under the state folder.
    snap = revisions.snapshot_dir(settings.state, rev_e)
    assert (snap / "note.txt").read_text() == "e"


def test_a_revision_is_read_as_data_no_program_of_the_repositorys_config_runs(
    tmp_path: Path,
) -> None:
    """The watched checkout may be the one an agent works in: a filter its `.git/config`
    names (here with `.gitattributes` in the commit) never runs when worker reads HEAD and
    exports the revision, and the export holds the committed bytes."""
    repo = Repo(tmp_path / "repo")
    marker = tmp_path / "filter-ran"
    rev = repo.commit({".gitattributes": "*.py filter=evil\n", "child.py": "print(1)\n"})
    repo.git("config", "filter.evil.smudge", f"sh -c 'touch {marker}; cat'")
    assert revisions.head(repo.path) == rev
    dest = revisions.snapshot_dir(tmp_path / "state", rev)
    assert revisions.export(repo.path, rev, dest) is None
    assert (dest / "child.py").read_text() == "print(1)\n"
    assert not marker.exists()


def test_supervisor_refuses_root_unless_allowed(workspace: Path) -> None:
    from worker.daemon.supervisor import supervise
    from worker.errors import ConfigError

    settings = settings_for(workspace, allow_root=False)
    with pytest.raises(ConfigError, match="refuses to run as root"):
        supervise(settings, euid=lambda: 0)


def _counting_build() -> str:
    """A build step that appends the revision it built (from the snapshot marker) to a file."""
    return (
        "import pathlib, sys\n"
        "rev = pathlib.Path('.worker-snapshot-complete').read_text().strip()\n"
        "with open(pathlib.Path(sys.argv[1]) / 'builds.txt', 'a') as fh:\n"
        "    fh.write(rev[:7] + '\\n')\n"
    )


class _FakeChild:
    """A child that never exits by itself; records how it was stopped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.stopped = False

    def poll(self) -> int | None:
        return -15 if self.stopped else None

    def stop(self, grace_s: float) -> int | None:
        self.stopped = True
        return -15


def test_a_hung_child_without_heartbeats_is_killed_and_restarted(workspace: Path) -> None:
    """Driven by injected clocks and a fake launcher: no process, no sleeping on time."""
    settings = settings_for(
        workspace,
        heartbeat_timeout_s=30.0,
        backoff_base_s=5.0,
        backoff_cap_s=60.0,
        backoff_jitter=0.0,
    )
    clock = [1000.0]
    children: list[_FakeChild] = []

    def launcher(argv: object, *, cwd: Path, env: dict[str, str], log_path: Path) -> _FakeChild:
        children.append(_FakeChild(100 + len(children)))
        store = Store(settings.db_path)
        record = {"token": env[health.TOKEN_ENV], "at": clock[0], "pid": children[-1].pid}
        store.put(health.READY_KEY, json.dumps(record))
        store.put(health.HEARTBEAT_KEY, json.dumps(record))
        store.close()
        return children[-1]

    sup = Supervisor(settings, launcher=launcher, clock=lambda: clock[0], wall=lambda: clock[0])
    sup._boot()
    sup.tick()  # starts child 100
    sup.tick()  # sees it ready
    clock[0] += 29.0
    sup.tick()  # 29 s without a beat: still fine
    assert not children[0].stopped
    clock[0] += 2.0
    sup.tick()  # 31 s: hung
    assert children[0].stopped and sup.running is None
    assert sup.next_start == clock[0] + 5.0  # the first backoff step
    clock[0] += 5.0
    sup.tick()
    assert [c.pid for c in children] == [100, 101]
    killed = sup.state.events(1, kind="killed")[0]
    assert (killed["pid"], killed["reason"]) == (100, "no heartbeat for 30 s")
    sup._shutdown()
