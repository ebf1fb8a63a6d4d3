"""`worker doctor`: check what a run needs, and say what to fix.

A check is a name and a function from the `Context` to findings (ok / warn / fail, each with a
message that says what to fix). `CHECKS` is the ordered registry: a new check is one function and
one line in that list. Exit 0 when nothing fails, 78 (EX_CONFIG) otherwise.

The checks live by what they look at: the agents (`doctor_agents`), GitHub (`doctor_github`),
worker's folders (`doctor_folders`), the scheduled runs (`doctor_schedule`), delivery,
maintenance and spend (`doctor_work`); the configuration and the reports other parts write stay
here. Every check, `Finding`, `Status`, `Context` and `TESTED_VERSIONS` is importable from here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from worker.config import Settings
from worker.operator import config_sources, heartbeat
from worker.operator.doctor_agents import TESTED_VERSIONS, check_agents, check_gemini, check_modes
from worker.operator.doctor_findings import Check, Context, DoctorReport, Finding, Status
from worker.operator.doctor_folders import check_database, check_inbox, check_reach, check_state
from worker.operator.doctor_github import check_github
from worker.operator.doctor_schedule import check_environment, check_schedules
from worker.operator.doctor_work import check_delivery, check_maintenance, check_spend
from worker.operator.notify import checkup as notify_checkup
from worker.sandbox import report as sandbox_report

__all__ = [
    "CHECKS",
    "TESTED_VERSIONS",
    "Check",
    "Context",
    "DoctorReport",
    "Finding",
    "Status",
    "check_agents",
    "check_config",
    "check_database",
    "check_delivery",
    "check_environment",
    "check_gemini",
    "check_github",
    "check_heartbeat",
    "check_inbox",
    "check_maintenance",
    "check_modes",
    "check_notify",
    "check_reach",
    "check_sandbox",
    "check_schedules",
    "check_spend",
    "check_state",
    "run_doctor",
]


def run_doctor(
    settings: Settings,
    env: Mapping[str, str] | None = None,
    checks: Iterable[tuple[str, Check]] | None = None,
) -> DoctorReport:
    context = Context(settings, dict(os.environ) if env is None else env)
    findings: list[Finding] = []
    for name, check in CHECKS if checks is None else checks:
        try:
            findings.extend(check(context))
        except Exception as exc:  # one broken check must not hide the others' answers
            findings.append(Finding(name, Status.FAIL, f"the check itself failed: {exc!r}"))
    return DoctorReport(findings)


# -- the checks -------------------------------------------------------------------------------
def check_config(context: Context) -> Iterable[Finding]:
    """What loading worker.toml and WORKER_* found: each problem with its fix (doctor loads
    the settings leniently, so it runs and reports whatever is wrong)."""
    for problem in context.settings.problems:
        status = Status.FAIL if problem.fatal else Status.WARN
        yield Finding("config", status, str(problem))
    if not context.settings.problems:
        yield Finding("config", Status.OK, "worker.toml and the WORKER_* variables are valid")
    yield Finding(
        "config", Status.OK, f"read in this order: {config_sources.layers_line(context.settings)}"
    )
    for line in config_sources.given(context.settings):
        yield Finding("config", Status.OK, line)


def check_notify(context: Context) -> Iterable[Finding]:
    """Every configured channel: its token here and in the scheduled runs, its chats."""
    for status, message in notify_checkup.describe(context.settings, context.env):
        yield Finding("notify", Status(status), message)


def check_heartbeat(context: Context) -> Iterable[Finding]:
    """With `[notify] heartbeat_url`: the last ping and how it went."""
    found = heartbeat.doctor_line(context.settings)
    if found is not None:
        yield Finding("heartbeat", Status.OK if found[0] else Status.WARN, found[1])


def check_sandbox(context: Context) -> Iterable[Finding]:
    """Which runtime will box the agents and what it enforces here (worker/sandbox/box.py)."""
    for status, message in sandbox_report.describe(context.settings):
        yield Finding("sandbox", Status(status), message)


CHECKS: list[tuple[str, Check]] = [
    ("config", check_config),
    ("modes", check_modes),
    ("agents", check_agents),
    ("state", check_state),
    ("reach", check_reach),
    ("database", check_database),
    ("inbox", check_inbox),
    ("github", check_github),
    ("delivery", check_delivery),
    ("environment", check_environment),
    ("schedule", check_schedules),
    ("gemini", check_gemini),
    ("maintenance", check_maintenance),
    ("spend", check_spend),
    ("notify", check_notify),
    ("heartbeat", check_heartbeat),
    ("sandbox", check_sandbox),
]
