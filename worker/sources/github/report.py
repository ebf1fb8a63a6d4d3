"""What the status comment says (pure rendering).

Every text that reaches GitHub goes through `redact`, and the agent's words cannot forge a
claim marker (only the first line of our own comment is read as one).
"""

from __future__ import annotations

import time

from worker.humanize import duration
from worker.models import Outcome, TaskResult
from worker.process.proc import redact
from worker.sources.github.settings import GitHubSettings

_ICONS = {
    Outcome.SUCCESS: "✅",
    Outcome.FAILURE: "❌",
    Outcome.WAITING: "⏸️",
    Outcome.STOPPED: "⏹️",
    Outcome.EXPIRED: "⌛",
    Outcome.CANCELLED: "🚫",
}


def end_label(settings: GitHubSettings, outcome: Outcome) -> str | None:
    """The label that shows the end state; None when the issue is available again."""
    if outcome is Outcome.SUCCESS:
        return settings.done_label
    if outcome is Outcome.WAITING:
        return settings.waiting_label
    if outcome is Outcome.STOPPED:
        return None
    if outcome is Outcome.CANCELLED:
        return settings.cancelled_label
    return settings.failed_label


def claimed_body(head: str, machine: str, run: int | str) -> str:
    at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    return (
        f"{head}\n🤖 **worker** on `{_code(machine)}` claimed this issue (run {run}) and "
        f"is working on it.\n\n_Claimed {at}; last sign of life {at}._"
    )


def result_body(
    head: str, machine: str, run: int | str, result: TaskResult, notes: list[str]
) -> str:
    icon = _ICONS.get(result.outcome, "ℹ️")
    modes = " → ".join(result.modes) or "-"
    escalations = max(0, len(dict.fromkeys(result.modes)) - 1)
    rows = [
        ("Outcome", f"{icon} {result.outcome.value}"),
        ("Iterations", str(_iterations(result))),
        (
            "Modes",
            modes
            + (f" ({escalations} escalation{'s' * (escalations != 1)})" if escalations else ""),
        ),
        ("Duration", duration(result.duration_s)),
        ("Cost", f"${result.cost_usd:.4f}"),
        ("Branch", f"`{_code(result.branch)}`" if result.branch else "-"),
    ]
    pull = result.pull_request
    if pull is not None:
        rows.append(("Pull request", f"#{pull['number']} {_text(str(pull.get('url') or ''), 300)}"))
    lines = [
        head,
        f"🤖 **worker** on `{_code(machine)}` · run {run}",
        "",
        "| | |",
        "|---|---|",
        *(f"| {k} | {_cell(v)} |" for k, v in rows),
    ]
    if result.reason and result.outcome is not Outcome.SUCCESS:
        lines += ["", f"**Why:** {_text(result.reason, 1500)}"]
    elif result.reason:
        lines += ["", f"**Summary:** {_text(result.reason, 1500)}"]
    if result.reason_codes:
        lines += [
            "",
            "Reason codes: " + ", ".join(f"`{_code(c)}`" for c in result.reason_codes[:12]),
        ]
    if result.anomalies:
        lines += ["", "Supervisor: " + _text("; ".join(result.anomalies[:5]), 600)]
    lines += [f"\n{_text(note, 600)}" for note in notes]
    if result.final_text:
        lines += [
            "",
            "<details><summary>Agent's last words</summary>",
            "",
            "```text",
            _text(result.final_text[-3000:], 3000).replace("```", "ʼʼʼ"),
            "```",
            "</details>",
        ]
    return "\n".join(lines)


def _iterations(result: TaskResult) -> int:
    total = result.iterations_total
    return len(result.iterations) if total is None else total


def _text(value: str, cap: int) -> str:
    # No HTML comments from untrusted text: a forged marker must never appear in our comment.
    return redact(value)[:cap].replace("<!--", "&lt;!--")


def _code(value: str | None) -> str:
    return _text(str(value or ""), 200).replace("`", "'")


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")
