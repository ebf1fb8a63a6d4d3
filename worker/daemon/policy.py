"""Restart policy: backoff and crash-loop detection. Pure: time comes in as numbers.

Defaults and their sources:
1 s doubling with jitter, cap 60 s, reset after 10 minutes stable (Kubernetes, KEP-4603);
5 crashes in 300 s is a crash loop (Erlang/OTP restart intensity).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

from worker.daemon.settings import DaemonSettings

# sysexits: 78 EX_CONFIG means "fix the configuration, do not restart" (BSD sysexits.h).
EXIT_CONFIG = 78


class Verdict(StrEnum):
    RESTART = "restart"  # start the same revision again after `delay_s`
    CRASH_LOOP = "crash_loop"  # too many crashes in the window: roll back or give up
    DO_NOT_RESTART = "do_not_restart"  # the child said its configuration is wrong


@dataclass(frozen=True)
class ExitDecision:
    verdict: Verdict
    delay_s: float
    crashed: bool
    reason: str


def backoff_delay(restarts: int, s: DaemonSettings, rng: random.Random) -> float:
    """Delay before restart number `restarts` (0-based): base * 2^n, capped, minus jitter.

    Jitter only shortens the delay, so the cap holds and delays still grow while doubling."""
    raw = min(s.backoff_cap_s, s.backoff_base_s * 2 ** min(restarts, 62))
    return raw * (1.0 - s.backoff_jitter * rng.random())


@dataclass
class RestartPolicy:
    """Remembers restarts and crash times of the current revision; decides what an exit means."""

    settings: DaemonSettings
    rng: random.Random = field(default_factory=random.Random)
    restarts: int = 0
    crashes: deque[float] = field(default_factory=deque)

    def reset(self) -> None:
        """A new revision starts with a clean slate."""
        self.restarts = 0
        self.crashes.clear()

    def on_exit(self, *, exit_code: int | None, uptime_s: float, now: float) -> ExitDecision:
        """Decide what to do after the child exited by itself (not asked to stop).

        A signal death (negative code, or None) and any non-zero code count as crashes; a clean
        exit restarts but is not a crash. A child that ran for `backoff_reset_s` resets backoff.
        """
        s = self.settings
        if uptime_s >= s.backoff_reset_s:
            self.restarts = 0
        if exit_code == EXIT_CONFIG:
            return ExitDecision(Verdict.DO_NOT_RESTART, 0.0, True, "exit 78: configuration error")
        reason = describe_exit(exit_code)
        if exit_code != 0:
            self.crashes.append(now)
            return self._after_crash(reason, now)
        return self.schedule_restart(reason, crashed=False)

    def on_failure(self, reason: str, now: float) -> ExitDecision:
        """The supervisor ended the child itself (no readiness, stale heartbeat): a crash."""
        self.crashes.append(now)
        return self._after_crash(reason, now)

    def _after_crash(self, reason: str, now: float) -> ExitDecision:
        s = self.settings
        while self.crashes and now - self.crashes[0] > s.crash_loop_window_s:
            self.crashes.popleft()
        if len(self.crashes) >= s.crash_loop_count:
            return ExitDecision(
                Verdict.CRASH_LOOP,
                0.0,
                True,
                f"crash loop: {len(self.crashes)} crashes in {s.crash_loop_window_s:g} s"
                f" (last: {reason})",
            )
        return self.schedule_restart(reason, crashed=True)

    def schedule_restart(self, reason: str, crashed: bool) -> ExitDecision:
        delay = backoff_delay(self.restarts, self.settings, self.rng)
        self.restarts += 1
        return ExitDecision(Verdict.RESTART, delay, crashed, reason)


def describe_exit(exit_code: int | None) -> str:
    if exit_code is None:
        return "exit status unknown"
    if exit_code < 0:
        return f"killed by signal {-exit_code}"
    return f"exit {exit_code}"
