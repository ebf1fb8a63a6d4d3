"""The settings' lower bounds, written as pydantic's constrained types (`PositiveFloat`,
`NonNegativeInt`, ...; cheaper to build at every start than `Field(default, gt=0)`), refuse
what they refused before, name the key, and keep their defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.config import load_settings
from worker.errors import ConfigError


@pytest.mark.parametrize(
    ("toml", "key", "message"),
    [
        ("lease_seconds = 0", "lease_seconds", "greater than 0"),
        ("task_cost_cap_usd = -1.5", "task_cost_cap_usd", "greater than 0"),
        ("daily_cost_cap_usd = 0", "daily_cost_cap_usd", "greater than 0"),
        ("[daemon]\ninterval_s = 0", "daemon.interval_s", "greater than 0"),
        ("[waits]\nrecheck_interval_s = -1", "waits.recheck_interval_s", "greater than or equal"),
        ("[review.style]\ninterval = -1", "review.style.interval", "greater than or equal"),
        ("[review.urgency]\nchurn = -0.1", "review.urgency.churn", "greater than or equal"),
        ("[review.style]\nmax_budget_usd = 0", "review.style.max_budget_usd", "greater than 0"),
        ("[supervision]\nstale_after_s = 0", "supervision.stale_after_s", "greater than 0"),
        ("[github]\nrate_limit_floor = -1", "github.rate_limit_floor", "greater than or equal"),
    ],
)
def test_a_value_below_its_bound_is_refused_naming_the_key(
    workspace: Path, toml: str, key: str, message: str
) -> None:
    (workspace / "worker.toml").write_text(toml + "\n")
    with pytest.raises(ConfigError, match=rf"{key}: Input should be {message}"):
        load_settings(workspace)


def test_the_bounds_keep_their_defaults_and_take_their_limits(workspace: Path) -> None:
    """No value: the defaults; zero where zero is allowed, None where the key is optional."""
    settings = load_settings(workspace)
    assert (settings.lease_seconds, settings.task_cost_cap_usd) == (3600, 3.0)
    assert settings.daily_cost_cap_usd is None and settings.review.style.max_budget_usd == 0.5
    (workspace / "worker.toml").write_text(
        "[waits]\nrecheck_interval_s = 0\n[review.style]\ninterval = 0\n[github]\nbackoff_s = 0\n"
    )
    settings = load_settings(workspace)
    assert settings.waits.recheck_interval_s == 0.0 and settings.review.style.interval == 0
    assert settings.github.backoff_s == 0.0
