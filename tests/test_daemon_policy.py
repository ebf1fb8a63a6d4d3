"""Restart policy and `[daemon]` settings: pure functions driven with numbers, no clock."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pydantic import ValidationError

from worker.config import load_settings
from worker.daemon.policy import RestartPolicy, Verdict, backoff_delay
from worker.daemon.settings import DaemonSettings, backoff_sum
from worker.errors import ConfigError


def test_defaults_are_the_reference_values() -> None:
    """The defaults of systemd, Kubernetes and Erlang/OTP cited in worker/daemon/policy.py."""
    d = DaemonSettings()
    assert (d.backoff_base_s, d.backoff_cap_s, d.backoff_reset_s) == (1.0, 60.0, 600.0)
    assert (d.crash_loop_count, d.crash_loop_window_s) == (5, 300.0)
    assert (d.startup_timeout_s, d.stable_window_s, d.allow_root) == (90.0, 600.0, False)


def test_backoff_doubles_from_one_second_to_the_cap_without_jitter() -> None:
    s = DaemonSettings(backoff_jitter=0)
    delays = [backoff_delay(n, s, random.Random(0)) for n in range(9)]
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60, 60]


def test_jitter_only_shortens_so_the_cap_holds() -> None:
    s = DaemonSettings(backoff_jitter=0.5)
    rng = random.Random(3)
    for n in range(20):
        nominal = min(60.0, 2.0**n)
        assert nominal * 0.5 <= backoff_delay(n, s, rng) <= nominal


def test_a_crash_loop_is_five_crashes_within_the_window() -> None:
    policy = RestartPolicy(DaemonSettings(), random.Random(0))
    verdicts = [policy.on_exit(exit_code=1, uptime_s=0.5, now=t).verdict for t in range(5)]
    assert verdicts == [Verdict.RESTART] * 4 + [Verdict.CRASH_LOOP]


def test_crashes_spread_wider_than_the_window_never_trip() -> None:
    policy = RestartPolicy(DaemonSettings(), random.Random(0))
    for n in range(20):
        decision = policy.on_exit(exit_code=1, uptime_s=0.5, now=n * 100.0)
        assert decision.verdict is Verdict.RESTART


def test_a_long_healthy_run_resets_the_backoff() -> None:
    policy = RestartPolicy(DaemonSettings(backoff_jitter=0), random.Random(0))
    first = [policy.on_exit(exit_code=1, uptime_s=1, now=t * 400.0).delay_s for t in range(3)]
    after_stable = policy.on_exit(exit_code=1, uptime_s=600, now=2000.0).delay_s
    assert first == [1, 2, 4] and after_stable == 1


def test_a_clean_exit_restarts_but_is_not_a_crash() -> None:
    policy = RestartPolicy(DaemonSettings(), random.Random(0))
    decisions = [policy.on_exit(exit_code=0, uptime_s=1, now=float(t)) for t in range(10)]
    assert all(d.verdict is Verdict.RESTART and not d.crashed for d in decisions)


def test_exit_78_means_do_not_restart_and_signals_are_crashes() -> None:
    policy = RestartPolicy(DaemonSettings(), random.Random(0))
    assert policy.on_exit(exit_code=78, uptime_s=1, now=0).verdict is Verdict.DO_NOT_RESTART
    killed = policy.on_exit(exit_code=-9, uptime_s=1, now=1)
    assert killed.crashed and killed.reason == "killed by signal 9"


def test_a_window_shorter_than_the_backoff_sum_is_refused() -> None:
    """systemd's 5-in-10 s pitfall: 1+2+4+8 = 15 s of backoff can never fit in 10 s."""
    assert backoff_sum(1, 60, 4) == 15
    with pytest.raises(ValidationError, match="must exceed the sum"):
        DaemonSettings(crash_loop_window_s=10)


def test_daemon_section_of_worker_toml_is_validated(tmp_path: Path) -> None:
    (tmp_path / "worker.toml").write_text("[daemon]\nbackof_base_s = 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"daemon\.backof_base_s"):
        load_settings(tmp_path)
    (tmp_path / "worker.toml").write_text(
        '[daemon]\nstable_window_s = 30\nbuild_command = ["make"]\n', encoding="utf-8"
    )
    d = load_settings(tmp_path).daemon
    assert d.stable_window_s == 30 and d.build_command == ["make"]


def test_a_window_shorter_than_the_backoff_at_its_cap_is_refused() -> None:
    """The backoff is not reset by a crash, so a burst can start with every delay at the cap:
    4 x 60 s = 240 s between five crashes. A 100 s window (wider than 1+2+4+8) never trips."""
    with pytest.raises(ValidationError, match="must exceed the sum"):
        DaemonSettings(crash_loop_window_s=100)


def test_a_crash_loop_is_caught_even_after_the_backoff_reached_its_cap() -> None:
    """Crashes every 5 min push the delay to its cap; a burst after that still trips."""
    s = DaemonSettings(backoff_jitter=0)
    policy = RestartPolicy(s, random.Random(0))
    now = 0.0
    for _ in range(8):  # slow crashes, each a long way outside the window
        now += 400.0
        policy.on_exit(exit_code=1, uptime_s=100, now=now)
    verdicts = []
    for _ in range(5):  # now it dies as soon as it starts
        decision = policy.on_exit(exit_code=1, uptime_s=0.5, now=now)
        verdicts.append(decision.verdict)
        now += decision.delay_s + 0.5
    assert Verdict.CRASH_LOOP in verdicts
