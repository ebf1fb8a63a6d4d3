"""`worker schedule cron` fires at the asked interval, exactly, or refuses naming why and what
to use: the printed crontab's time fields are expanded minute by minute over two days by the
small cron reader below (the five fields as crontab(5) defines them), and the gaps between the
firings must all be the interval."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worker.cli.app import app
from worker.errors import WorkerError

START = datetime(2026, 3, 1)  # a Sunday, the end of February just behind it
TWO_DAYS = 2 * 24 * 60


def field_values(field: str, low: int, high: int) -> set[int]:
    """The values a crontab field matches: `*`, `a`, `a-b`, any of them `/step`, comma lists."""
    values: set[int] = set()
    for part in field.split(","):
        span, _, step = part.partition("/")
        if span == "*":
            first, last = low, high
        elif "-" in span:
            first, last = map(int, span.split("-"))
        else:
            first = int(span)
            last = high if step else first
        values.update(range(first, last + 1, int(step or 1)))
    assert values <= set(range(low, high + 1)), f"{field} goes outside {low}-{high}"
    return values


def firings(crontab: str, minutes: int = TWO_DAYS) -> list[datetime]:
    """Every minute of `minutes` from START at which a line of `crontab` fires."""
    lines = [line.split()[:5] for line in crontab.splitlines() if line and line[0] != "#"]
    matchers = [
        (
            field_values(m, 0, 59),
            field_values(h, 0, 23),
            field_values(dom, 1, 31),
            field_values(mon, 1, 12),
            {d % 7 for d in field_values(dow, 0, 7)},
        )
        for m, h, dom, mon, dow in lines
    ]
    found = []
    for offset in range(minutes):
        t = START + timedelta(minutes=offset)
        for mins, hours, days, months, weekdays in matchers:
            if (
                t.minute in mins
                and t.hour in hours
                and t.day in days
                and t.month in months
                and (t.isoweekday() % 7) in weekdays
            ):
                found.append(t)
                break
    return found


def schedule(monkeypatch: pytest.MonkeyPatch, ws: Path, interval_s: int) -> tuple[int, str]:
    monkeypatch.setenv("WORKER_DAEMON__INTERVAL_S", str(interval_s))
    result = CliRunner().invoke(app, ["schedule", "cron", "-w", str(ws)])
    if isinstance(result.exception, WorkerError):  # main() prints it and exits with its code
        assert result.stdout == ""
        return int(result.exception.exit_code), str(result.exception)
    return result.exit_code, result.stdout


@pytest.mark.parametrize(
    "interval_s", [300, 3600, 86400, 5400, 2700, 1200, 8 * 3600, 60], ids=lambda s: f"{s}s"
)
def test_every_firing_of_the_printed_crontab_is_the_interval_apart(
    monkeypatch: pytest.MonkeyPatch, workspace: Path, interval_s: int
) -> None:
    """5 min, 1 h, 1 day, 90 min (two lines), 45 min (four), 20 min, 8 h and 1 min: over two
    days the firings are exactly the interval apart, the first at midnight."""
    code, out = schedule(monkeypatch, workspace, interval_s)
    assert code == 0, out
    times = firings(out)
    assert times[0] == START
    gaps = {(b - a).total_seconds() for a, b in pairwise(times)}
    assert gaps == {interval_s}
    assert len(times) == TWO_DAYS * 60 // interval_s


def test_ninety_minutes_is_two_lines_not_hourly(
    monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    """The case of the issue: 90 minutes used to print `0 */1 * * *` (hourly)."""
    code, out = schedule(monkeypatch, workspace, 5400)
    fields = [" ".join(line.split()[:5]) for line in out.splitlines() if line[:1] != "#"]
    assert code == 0 and fields == ["0 */3 * * *", "30 1-23/3 * * *"]


@pytest.mark.parametrize(
    ("interval_s", "nearest"),
    [
        (420, ["6 min (interval_s = 360)", "8 min (interval_s = 480)"]),
        (90000, ["1 day (interval_s = 86400)", "7 days (interval_s = 604800)"]),
        (100, ["1 min (interval_s = 60)", "2 min (interval_s = 120)"]),
    ],
    ids=["7min", "25h", "100s"],
)
def test_an_interval_cron_cannot_keep_is_refused_with_the_nearest_and_the_alternatives(
    monkeypatch: pytest.MonkeyPatch, workspace: Path, interval_s: int, nearest: list[str]
) -> None:
    """7 minutes (`*/7` leaves a 4-minute gap at each hour), 25 hours (`*/25` fires daily) and
    100 s: exit 78 naming why, the nearest intervals cron keeps, and the schedulers that keep
    this one; nothing printed on stdout."""
    code, err = schedule(monkeypatch, workspace, interval_s)
    assert code == 78
    assert "divides a day" in err
    for near in nearest:
        assert near in err
    assert "worker schedule systemd" in err and "worker serve" in err


def test_the_nearest_intervals_named_in_a_refusal_do_fire_evenly(
    monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    """The refusal's advice holds: 6 and 8 minutes, offered for 7, print crontabs whose
    firings are that far apart."""
    for interval_s in (360, 480):
        code, out = schedule(monkeypatch, workspace, interval_s)
        times = firings(out)
        gaps = {(b - a).total_seconds() for a, b in pairwise(times)}
        assert code == 0 and gaps == {interval_s}


def test_a_weekly_interval_fires_on_sunday_midnight(
    monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    """A week is the one interval above a day that cron keeps (day-of-month steps break at
    the end of a month)."""
    code, out = schedule(monkeypatch, workspace, 7 * 86400)
    assert code == 0
    assert firings(out, 15 * 24 * 60) == [START, START + timedelta(days=7), START + timedelta(14)]


def test_the_systemd_timer_counts_the_interval_from_each_start(
    monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    """A 7-minute interval, refused by cron, is a systemd timer ticking every 420 s from the
    start of the last run (OnUnitActiveSec=), as cron would."""
    monkeypatch.setenv("WORKER_DAEMON__INTERVAL_S", "420")
    result = CliRunner().invoke(app, ["schedule", "systemd", "--json", "-w", str(workspace)])
    (timer,) = [c for n, c in json.loads(result.stdout)["files"].items() if n.endswith(".timer")]
    assert result.exit_code == 0 and "OnUnitActiveSec=420s" in timer.splitlines()
