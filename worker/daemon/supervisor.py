"""`worker supervise`: keep `worker serve` alive, promote good revisions, roll back bad ones.

The control plane only (spec "Hard Boundaries"): it knows processes, exit codes, heartbeats and
revisions. It never reads the inbox, wait states, reports or prompts, never reads the child's
output, and imports nothing of the data plane (tests check both).

Lifecycle (spec "Lifecycle Policy" and "Upgrade / Rollback Rules"): start the child; on exit,
restart with backoff; a crash loop, a start that never becomes ready, or a failed build rolls a
candidate back to `current_good_rev`; a candidate that stays ready for `stable_window_s` is
promoted. The state lives in SQLite (state.py) and survives this process.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from worker.config import Settings
from worker.daemon import guard, health, revisions
from worker.daemon.child import ChildHandle, Launcher, launch
from worker.daemon.policy import ExitDecision, RestartPolicy, Verdict
from worker.daemon.state import SupervisorState
from worker.process.signals import stop_signals
from worker.state.store import Store

log = logging.getLogger(__name__)
PRESENCE_KEY = "supervise.presence"


@dataclass
class Running:
    child: ChildHandle
    revision: str | None
    token: str
    started: float
    ready_at: float | None = None


@dataclass
class SuperviseReport:
    exit_code: int
    reason: str
    current_good_rev: str | None


class Supervisor:
    def __init__(
        self,
        settings: Settings,
        *,
        launcher: Launcher = launch,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        until: Callable[[Supervisor], bool] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.d = settings.daemon
        self.store = Store(settings.db_path)
        self.state = SupervisorState(self.store)
        self.policy = RestartPolicy(self.d, rng or random.Random())
        self.repo = revisions.find_repo(settings)
        self._launch = launcher
        self._clock = clock
        self._wall = wall
        self._until = until
        self._env = dict(os.environ) if env is None else env
        self._stopping = threading.Event()
        self._stop_reason = ""
        self.revision: str | None = None  # what should run now
        self.good: str | None = None
        self.running: Running | None = None
        self.next_start: float | None = None
        self.next_revision_check = 0.0
        self.result: SuperviseReport | None = None

    # -- public -------------------------------------------------------------------------------
    def stop(self, reason: str) -> None:
        """Thread-safe: end the loop, stop the child gracefully, exit 0."""
        self._stop_reason = self._stop_reason or reason
        self._stopping.set()

    def run(self) -> SuperviseReport:
        try:
            self._boot()
            while not self._stopping.is_set() and self.result is None:
                self.tick()
                if self._until is not None and self._until(self):
                    self.stop("until")
                    break
                self._stopping.wait(self.d.poll_s)
        finally:
            self._shutdown()
        return self.result or SuperviseReport(0, self._stop_reason, self.good)

    # -- boot and shutdown --------------------------------------------------------------------
    def _boot(self) -> None:
        snap = self.state.snapshot()
        self.good = snap.current_good_rev
        self.state.put_json(PRESENCE_KEY, {"pid": os.getpid(), "started_at": self._wall()})
        self.state.event("supervisor_start", revision=self.good, pid=os.getpid())
        now = self._clock()
        head = revisions.head(self.repo) if self.repo is not None else None
        if self.repo is not None and head is None:
            log.warning("%s has no commits: running the installed worker", self.repo)
            self.repo = None
        if self.repo is None:
            self.next_start = now  # unversioned: run the installed worker
            return
        if self.good is not None:
            failure = self._prepare(self.good)
            if failure is None:
                self.revision, self.next_start = self.good, now
            elif head == self.good:  # nothing else to try: escalate
                reason = f"good revision {self.good[:12]} no longer builds: {failure}"
                self.state.set(last_failure_reason=reason)
                self.result = SuperviseReport(1, reason, self.good)
        if snap.candidate_rev is not None and snap.candidate_rev != head:
            self.state.set(candidate_rev=None)  # left by the last supervisor, HEAD moved since
        self.next_revision_check = now  # the first tick looks at HEAD

    def _shutdown(self) -> None:
        self._stop_child(self._stop_reason or "supervisor stopping")
        self.state.put_json(PRESENCE_KEY, {"pid": os.getpid(), "stopped_at": self._wall()})
        self.store.close()

    def _stop_child(self, reason: str) -> None:
        """A stop we asked for: not a crash, no restart scheduled."""
        run, self.running = self.running, None
        if run is not None:
            code = run.child.stop(self.d.stop_grace_s)
            self.state.event(
                "stop", revision=run.revision, pid=run.child.pid, exit_code=code, reason=reason
            )

    # -- one tick -----------------------------------------------------------------------------
    def tick(self) -> None:
        now = self._clock()
        if self.repo is not None and now >= self.next_revision_check:
            self.next_revision_check = now + self.d.revision_poll_s
            self._consider(revisions.head(self.repo))
            now = self._clock()  # a build may have taken a while
        if self.running is not None:
            self._watch(self.running, now)
        elif self.next_start is not None and now >= self.next_start:
            self._start(now)

    def _watch(self, run: Running, now: float) -> None:
        code = run.child.poll()
        if code is not None:
            self.running = None
            self.state.event("exit", revision=run.revision, pid=run.child.pid, exit_code=code)
            self._apply(self.policy.on_exit(exit_code=code, uptime_s=now - run.started, now=now))
            return
        seen = health.read(self.store)
        if run.ready_at is None:
            if seen.ready_token == run.token:
                run.ready_at = now
                self.state.event("ready", revision=run.revision, pid=run.child.pid)
            elif now - run.started >= self.d.startup_timeout_s:
                reason = f"not ready within {self.d.startup_timeout_s:g} s"
                # Spec: a candidate whose start never becomes ready is rolled back at once.
                self._end(run, reason, roll_back=self._is_candidate() and self.good is not None)
            return
        age = self._wall() - seen.beat_at if seen.beat_at is not None else 0.0
        if seen.beat_token == run.token and age > self.d.heartbeat_timeout_s:
            self._end(run, f"no heartbeat for {self.d.heartbeat_timeout_s:g} s", False)
            return
        if self._is_candidate() and now - run.ready_at >= self.d.stable_window_s:
            self._promote(run)

    def _end(self, run: Running, reason: str, roll_back: bool) -> None:
        """The supervisor gives up on a live child: stop it and count a crash."""
        code = run.child.stop(self.d.stop_grace_s)
        self.running = None
        self.state.event(
            "killed", revision=run.revision, pid=run.child.pid, exit_code=code, reason=reason
        )
        if roll_back:
            self._rollback(reason)
            return
        self._apply(self.policy.on_failure(reason, self._clock()))

    def _apply(self, decision: ExitDecision) -> None:
        rev = self.revision
        if decision.verdict is Verdict.RESTART:
            self.next_start = self._clock() + decision.delay_s
            self.state.event(
                "restart_scheduled",
                revision=rev,
                delay_s=decision.delay_s,
                reason=decision.reason,
            )
            return
        if self._is_candidate() and self.good is not None:
            self._rollback(decision.reason)
            return
        # The good revision (or a first one with nothing to fall back to) cannot stay up:
        # escalate like an Erlang supervisor, to systemd/cron/the person who started us. The
        # revision is not marked failed: with nothing better to run, the next start retries it.
        self.state.set(last_failure_reason=decision.reason)
        self.state.event("give_up", revision=rev, reason=decision.reason)
        code = 78 if decision.verdict is Verdict.DO_NOT_RESTART else 1
        self.result = SuperviseReport(code, decision.reason, self.good)

    def _start(self, now: float) -> None:
        self.next_start = None
        rev = self.revision
        if self.repo is not None and rev is None:
            return  # nothing that builds yet; _consider() starts the next good candidate
        snapshot = revisions.snapshot_dir(self.settings.state, rev) if rev else None
        token = uuid.uuid4().hex
        env = revisions.child_env(self._env, snapshot, rev)
        env[health.TOKEN_ENV] = token
        cwd = snapshot or self.settings.workspace
        try:
            child = self._launch(
                self._argv(), cwd=cwd, env=env, log_path=self.settings.logs / "serve.log"
            )
        except OSError as exc:
            self.state.event("start_failed", revision=rev, reason=str(exc))
            self._apply(self.policy.on_failure(f"cannot start: {exc}", now))
            return
        self.running = Running(child, rev, token, now)
        self.state.event("start", revision=rev, pid=child.pid)

    def _argv(self) -> list[str]:
        if self.d.child_command:
            return revisions.expand(self.d.child_command, self.settings)
        return revisions.expand(
            ["{python}", "-m", "worker", "serve", "--workspace", "{workspace}"], self.settings
        )

    # -- revisions ----------------------------------------------------------------------------
    def _is_candidate(self) -> bool:
        return self.revision is not None and self.revision != self.good

    def _prepare(self, rev: str) -> str | None:
        """Snapshot and build `rev` unless done before; the failure reason, or None."""
        assert self.repo is not None
        snapshot = revisions.snapshot_dir(self.settings.state, rev)
        built = (self.state.revision(rev) or {}).get("build_ok") == 1
        if built and snapshot.is_dir():
            return None
        failure = revisions.export(self.repo, rev, snapshot)
        if failure is None:
            failure = revisions.build(
                self.settings, snapshot, revisions.child_env(self._env, snapshot, rev)
            )
        self.state.update_revision(rev, build_ok=int(failure is None), failure_reason=failure)
        return failure

    def _consider(self, head: str | None) -> None:
        """A new HEAD is a candidate: build it; if it builds, run it instead of the current."""
        if head is None or head in (self.revision, self.good) or self.state.failed(head):
            return
        self.state.update_revision(head)
        self.state.set(candidate_rev=head)
        self.state.event("candidate", revision=head)
        failure = self._prepare(head)
        if failure is not None:
            self.state.set(candidate_rev=None, last_failure_reason=f"{head[:12]}: {failure}")
            self.state.event("build_failed", revision=head, reason=failure)
            return
        self._stop_child(f"switching to candidate {head[:12]}")
        self.revision = head
        self.policy.reset()
        self.next_start = self._clock()

    def _promote(self, run: Running) -> None:
        rev = run.revision
        assert rev is not None
        self.state.update_revision(rev, health_ok=1, promoted_at=self._wall(), failure_reason=None)
        self.state.set(current_good_rev=rev, candidate_rev=None)
        self.state.event("promote", revision=rev, pid=run.child.pid)
        self.good = rev
        self._prune()

    def _rollback(self, reason: str) -> None:
        bad = self.revision
        assert bad is not None
        self.state.update_revision(bad, health_ok=0, failure_reason=reason)
        self.state.set(candidate_rev=None, last_failure_reason=f"{bad[:12]}: {reason}")
        self.state.event("rollback", revision=bad, reason=f"back to {self.good}: {reason}")
        self.revision = self.good
        self.policy.reset()
        self.next_start = self._clock()
        self._prune()

    def _prune(self) -> None:
        keep = {rev for rev in (self.good, self.revision) if rev}
        revisions.prune(self.settings.state, keep, self.d.keep_snapshots)


def supervise(
    settings: Settings,
    *,
    allow_root: bool = False,
    euid: Callable[[], int | None] | None = None,
    **kwargs: Any,
) -> SuperviseReport:
    """Refuse root, take the per-workspace lock, run until a signal or a give-up."""
    guard.refuse_root(allow_root or settings.daemon.allow_root, euid or guard.current_euid)
    with guard.single_supervisor(settings.state):
        supervisor = Supervisor(settings, **kwargs)
        with stop_signals(supervisor.stop):
            return supervisor.run()
