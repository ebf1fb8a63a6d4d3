"""What a scheduled run sees: the variables written into its definition (the PATH and the
WORKER_* variables, never a secret), the state folder pinned, and the secrets it needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from worker import secrets
from worker.delivery import delivery_lines

if TYPE_CHECKING:  # pydantic is not needed to print `worker --help`
    from worker.config import Settings


@dataclass(frozen=True)
class ScheduleEnv:
    """What a scheduled run sees: the user's PATH (cron's own is /usr/bin:/bin, where agent
    CLIs installed by npm are not), the WORKER_* variables set now, less the secrets, and the
    state folder this shell resolved (`WORKER_STATE_DIR`): cron, systemd and Task Scheduler
    start with another environment (no `XDG_STATE_HOME`, another `HOME` or `LOCALAPPDATA`),
    where the default would be another folder, with another inbox and database."""

    variables: dict[str, str] = field(default_factory=dict)
    left_out: tuple[str, ...] = ()  # names of secrets not written
    state: str | None = None  # the state folder, when pinned here
    inbox: str | None = None  # its inbox
    needed: tuple[str, ...] = ()  # the secrets the configuration needs, each with what for
    delivery: tuple[str, ...] = ()  # how each source's work is delivered (worker/delivery.py)

    def comment(self, prefix: str = "#") -> list[str]:
        lines = []
        if self.state is not None:
            lines.append(
                f"{prefix} State folder {self.state} (inbox {self.inbox}), pinned with "
                "WORKER_STATE_DIR: the same as `worker submit`, `status` and `log` in this shell."
            )
        lines += [f"{prefix} Delivery of {line}" for line in self.delivery]
        if self.variables:
            lines.append(
                f"{prefix} Environment: the PATH and WORKER_* variables `worker schedule` ran "
                "with, never a secret."
            )
        if self.needed:
            lines.append(
                f"{prefix} Secrets this configuration needs in the run's environment (never in "
                f"worker.toml): {'; '.join(self.needed)}"
            )
        if self.left_out:
            lines.append(
                f"{prefix} Left out as secrets (set them where the run's environment comes from):"
                f" {', '.join(self.left_out)}"
            )
        return lines


def schedule_env(env: Mapping[str, str], settings: Settings | None = None) -> ScheduleEnv:
    """The variables to write; with `settings`, the state folder they resolved is pinned
    unless a setting already names it (worker.toml's `state_dir`, read by the run too, or
    `WORKER_STATE_DIR`, written with the others)."""
    variables: dict[str, str] = {}
    left_out: list[str] = []
    if env.get("PATH"):
        variables["PATH"] = env["PATH"]
    for name in sorted(env):
        if not name.startswith("WORKER_"):
            continue
        # A crontab, a unit file and a task XML are readable files: a secret (by its name, or a
        # URL with a password in it) stays in the environment file or the profile.
        if secrets.is_secret_name(name) or secrets.has_url_password(env[name]):
            left_out.append(name)
        else:
            variables[name] = env[name]
    if settings is None:
        return ScheduleEnv(variables, tuple(left_out))
    if settings.state_dir is None:
        variables["WORKER_STATE_DIR"] = str(settings.state)
    return ScheduleEnv(
        variables,
        tuple(left_out),
        str(settings.state),
        str(settings.inbox),
        needed_secrets(settings),
        tuple(delivery_lines(settings)),
    )


# The variable each agent CLI reads its API key from (worker/agents/*: KEY_SETTING).
_AGENT_KEYS = {"claude": "ANTHROPIC_API_KEY", "codex": "OPENAI_API_KEY", "gemini": "GEMINI_API_KEY"}


def needed_secrets(settings: Settings) -> tuple[str, ...]:
    """Every secret the configuration needs from a scheduled run's environment, each with what
    it is for: a run started by cron without one is never notified, or never reaches GitHub."""
    # Here, not at the top: `worker --help` must not load the modes or the notify settings.
    from worker.modes import load_modes, modes_path
    from worker.operator.notify.settings import telegram_configured

    needed = []
    if settings.github.repos:
        needed.append("WORKER_GITHUB_TOKEN (or GITHUB_TOKEN: the GitHub source)")
    if telegram_configured(settings.notify):
        needed.append(f"{settings.notify.telegram.token_env} (the Telegram bot's token)")
    try:
        modes = load_modes(modes_path(settings.workspace, settings.modes_file)).modes.values()
        agents = sorted({mode.agent for mode in modes if mode.agent in _AGENT_KEYS})
    except Exception:  # a broken modes file is doctor's to say; the usual agent then
        agents = ["claude"]
    keys = " or ".join(_AGENT_KEYS[agent] for agent in agents)
    if keys:
        needed.append(f"{keys} (the agent's API key, unless its CLI is logged in)")
    return tuple(needed)
