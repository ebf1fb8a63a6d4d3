"""`worker waits list|show|approve|reject|cancel|adopt|prune`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from worker.cli import ui
from worker.cli.common import JsonOpt, WorkspaceOpt, settings_for
from worker.errors import UsageError
from worker.humanize import CONDITION_WORDS, moment, yes_no

if TYPE_CHECKING:
    from worker.config import Settings
    from worker.waits.intercom import Kind

app = typer.Typer(
    help="Tasks waiting for an approval, a reply, a decision or a moment.", no_args_is_help=True
)

IdArg = Annotated[
    str,
    typer.Argument(help="The task id (e.g. msg-123, owner/name#12) or the wait-state file name."),
]
NoteOpt = Annotated[str, typer.Option("--note", help="Text handed to the agent.")]
ByOpt = Annotated[
    str | None,
    typer.Option(
        "--by",
        help="Approve in this person's name (must be an allowed approver when the wait names any).",
    ),
]


@app.command("list")
def list_command(workspace: WorkspaceOpt = Path("."), as_json: JsonOpt = False) -> None:
    """List the waiting tasks, oldest first: what each waits for, since when, until when."""
    from worker.waits.service import list_waits

    data = list_waits(settings_for(workspace))
    ui.emit(data, as_json, _render_list)


def _render_list(data: dict[str, Any]) -> None:
    if not data["waits"]:
        ui.line("no task is waiting")
    else:
        ui.table(
            [_readable(w) for w in data["waits"]],
            ["task", "waits for", "since", "expires", "ready", "last checked"],
        )
    if data["quarantined"]:
        ui.warn(f"{data['quarantined']} unreadable wait-state file(s) in wait_states/rejected/")


def _readable(wait: dict[str, Any]) -> dict[str, Any]:
    """One wait in words: what it waits for, and times as dates with how long ago or until."""
    what = CONDITION_WORDS.get(wait["resume_when"], wait["resume_when"])
    if wait.get("wait_for"):
        what = f"{what}: {wait['wait_for']}"
    if wait.get("pull_request"):
        what = f"{what} (now {wait['pull_request']})"
    return {
        "task": wait["task_id"],
        "waits for": what,
        "since": moment(wait["since"]),
        "expires": moment(wait["expires_at"]),
        "ready": yes_no(wait["ready"]),
        "last checked": moment(wait["last_checked"]) if wait["last_checked"] else "not yet",
    }


@contextmanager
def _named_elsewhere(settings: Settings) -> Iterator[None]:
    """On a fleet, a wait this machine does not have is named where it is: waits live on
    the machine that ran the task, and only there can they be approved or ended."""
    from worker.waits.service import WaitNotFound

    try:
        yield
    except WaitNotFound as exc:
        if not settings.fleet.enabled:
            raise
        from worker.fleet.view import waiting_on

        machine = waiting_on(settings, exc.ident)
        if machine is None or machine == settings.machine_id:
            raise
        raise UsageError(
            f"{exc.ident} waits on machine {machine}, not on this one ({settings.machine_id}):"
            " run the command there, or answer through the task's source"
        ) from exc


@app.command("show")
def show_command(
    ident: IdArg, workspace: WorkspaceOpt = Path("."), as_json: JsonOpt = False
) -> None:
    """Show one wait: its file, its intercom notes and its log of reason codes."""
    from worker.waits.service import show

    settings = settings_for(workspace)
    with _named_elsewhere(settings):
        data = show(settings, ident)
    ui.emit(data, as_json, _render_show)


def _render_show(data: dict[str, Any]) -> None:
    for key in (
        "task_id",
        "file",
        "source",
        "resume_when",
        "wait_for",
        "reason",
        "since",
        "expires_at",
        "resume_at",
        "mode",
        "iteration",
        "resume_brief",
        "ready",
        "last_checked",
    ):
        if data.get(key) not in (None, ""):
            ui.line(f"{key}: {data[key]}")
    for note in data["notes"]:
        ui.line(
            f"note {note['file']}: {note['kind']} by {note.get('by') or 'local user'} "
            f"({note.get('origin') or 'origin unknown'}): "
            f"{note['text'][:200]}"
        )
    for event in data["log"][:20]:
        ui.line(f"log: {event['code']} {event['detail']}")


def _decide(
    ident: str, workspace: Path, kind: Kind, note: str, by: str | None, as_json: bool
) -> None:
    from worker.waits.service import note as write_note

    settings = settings_for(workspace)
    with _named_elsewhere(settings):
        data = write_note(settings, ident, kind, note, by)
    ui.emit(
        data,
        as_json,
        lambda d: ui.line(f"{d['kind']} of {d['task_id']} noted; the next `worker run` resumes it"),
    )


@app.command("approve")
def approve_command(
    ident: IdArg,
    workspace: WorkspaceOpt = Path("."),
    note: NoteOpt = "",
    by: ByOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Approve a task waiting for `user_approval` (through the local intercom)."""
    _decide(ident, workspace, "approval", note, by, as_json)


@app.command("reject")
def reject_command(
    ident: IdArg,
    workspace: WorkspaceOpt = Path("."),
    note: NoteOpt = "",
    by: ByOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Reject: the task resumes, told not to do what it asked approval for."""
    _decide(ident, workspace, "rejection", note, by, as_json)


@app.command("cancel")
def cancel_command(
    ident: IdArg,
    workspace: WorkspaceOpt = Path("."),
    reason: Annotated[str, typer.Option("--reason", help="Why (reported to the source).")] = "",
    as_json: JsonOpt = False,
) -> None:
    """End a wait now as cancelled; the outcome is reported to the task's source."""
    from worker.fleet import fleet_session
    from worker.waits.service import cancel

    settings = settings_for(workspace)
    with _named_elsewhere(settings):
        data = cancel(settings, ident, reason, attach=fleet_session)
    ui.emit(data, as_json, lambda d: ui.line(f"cancelled {d['task_id']}: {d['reason']}"))


@app.command("adopt")
def adopt_command(
    file: Annotated[str, typer.Argument(help="The wait-state file's name in wait_states/.")],
    workspace: WorkspaceOpt = Path("."),
    as_json: JsonOpt = False,
) -> None:
    """Take a wait-state file worker did not write (the specification's tool, a copy) as a
    wait. Files worker did not write are otherwise refused: an agent could write one."""
    from worker.waits.service import adopt

    data = adopt(settings_for(workspace), file)
    ui.emit(data, as_json, lambda d: ui.line(f"{d['file']} adopted as the wait of {d['task_id']}"))


@app.command("prune")
def prune_command(workspace: WorkspaceOpt = Path("."), as_json: JsonOpt = False) -> None:
    """Expire the waits past their expiry now and drop old intercom folders."""
    from worker.fleet import fleet_session
    from worker.waits.service import prune

    data = prune(settings_for(workspace), attach=fleet_session)
    ui.emit(
        data,
        as_json,
        lambda d: ui.line(
            f"expired {len(d['expired'])}, quarantined {d['quarantined']}, removed "
            f"{len(d['intercom_removed'])} intercom folder(s); {d['waiting']} still waiting"
        ),
    )


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="waits")
