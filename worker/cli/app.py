"""The `worker` command: one Typer app, one sub-module per command group."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.main import get_group

from worker import __version__
from worker.cli.common import COMPLETE_VAR, LogLevel, collect_rarely, lift_global_options
from worker.cli.common import log_level as log_level_of
from worker.errors import ExitCode, WorkerError

# Every command: the module that registers it, and the first paragraph of its help, which
# `worker --help` lists without importing the module (a test holds these to the modules).
# In the order `worker --help` lists them.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "Resume a ready wait state, or take the next task, drive the agent, report."),
    "log": (
        "log",
        "List recent runs: task and title, outcome and its codes (e.g. AGENT_NOT_FOUND), what"
        " ended it in words, the decision's reason codes, iterations and cost.",
    ),
    "status": (
        "status",
        "Show the running task (iteration, elapsed, cost, current tool), the waits (what each"
        " waits for, since when), the claims and their leases, the queue per source, the "
        "files set aside in rejected/, the last failures and today's spend.",
    ),
    "inspect": (
        "inspect",
        "Replay a transcript through the supervisor: each anomaly, where it starts, the steering.",
    ),
    "fleet": (
        "fleet",
        "Show each machine's health, task, mode, PACE and context fill; flag stale reports.",
    ),
    "why": (
        "why",
        "Explain why a run did what it did: the chosen flow, its class, the orders obeyed.",
    ),
    "cancel": (
        "cancel",
        "Cancel a task: a running one is stopped within seconds (its work kept), a waiting "
        "one cancelled, a queued one dropped; its source is told.",
    ),
    "serve": (
        "serve",
        "Run the batch cycle continuously: one run, then sleep until the interval ends or a "
        "message arrives. SIGTERM/SIGINT stop the running agent, keep its work, release the "
        "task.",
    ),
    "schedule": (
        "schedule",
        "Print a crontab line, systemd units or a Task Scheduler XML for this workspace. They"
        " carry this shell's PATH, WORKER_* variables (never a secret: those are left out) "
        "and state folder.",
    ),
    "doctor": (
        "doctor",
        "Check the agent CLIs, state and inbox folders, modes, GitHub token and repositories,"
        " the environment a scheduled run sees, and Gemini CLI's trust and auth settings.",
    ),
    "prune": (
        "prune",
        "Delete runs, decisions, ended claims, run logs and CLI folders past [retention].",
    ),
    "submit": (
        "submit",
        "Put a task into the inbox (a validated message, written atomically); print its id.",
    ),
    "queue": (
        "queue",
        "List the queued tasks of every source in the order runs would take them, with why "
        "each would or would not be taken next. Nothing is claimed or moved.",
    ),
    "show": (
        "show",
        "List each iteration of a run: its STATUS line, cost, tools used and files written.",
    ),
    "costs": (
        "costs",
        "Report the recorded spend: the tasks' agent calls, and the reviewers' apart.",
    ),
    "dashboard": (
        "dashboard",
        "Serve a web dashboard: machines, the running task live, waits to approve or reject, "
        "the queue, history, spend. Binds 127.0.0.1; every action needs the token.",
    ),
    "modes": ("modes", "Show and check the modes (modes/modes.json)."),
    "waits": ("waits", "Tasks waiting for an approval, a reply, a decision or a moment."),
    "intercom": (
        "intercom",
        "Local messages for tasks (`intercom_message`), and orders: /stop, /pause, /resume.",
    ),
    "directives": ("directives", "The reviewers' directives: what the next tasks must address."),
    "knowledge": (
        "directives",
        "The knowledge store (docs/knowledge/) and the reviewers that keep it.",
    ),
    "supervise": (
        "supervise",
        "Keep `worker serve` running: restarts with backoff, crash-loop detection, promotion "
        "and rollback of revisions.",
    ),
    "completion": (
        "completion",
        "Print the shell's completion script for worker (see the README to install it).",
    ),
}


class _LazyGroup(TyperGroup):
    """The root command: each command's module is imported when that command runs (or its
    own help is asked for); until then the command is its name and short help."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for name, (_module, text) in COMMANDS.items():
            self.commands.setdefault(name, _Pending(name=name, help=text, callback=None))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if isinstance(self.commands.get(cmd_name), _Pending):
            self.commands.update(load_commands(COMMANDS[cmd_name][0]))
        return self.commands.get(cmd_name)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """The root's options are taken anywhere before `--`; `--quiet` also reaches a command
        with a `--quiet` of its own (run, serve, supervise: no progress lines)."""
        lifted, rest = lift_global_options(args)
        if {"-q", "--quiet"} & set(lifted) and rest and not rest[0].startswith("-"):
            command = self.get_command(ctx, rest[0])
            if any("--quiet" in param.opts for param in getattr(command, "params", [])):
                rest.insert(1, "--quiet")
        return super().parse_args(ctx, [*lifted, *rest])

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(name, cmd) for name, cmd in self.commands.items() if not cmd.hidden]
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])


class _Pending(TyperCommand):
    """A command whose module is not imported yet."""


def load_commands(module_name: str) -> dict[str, Any]:
    """The click commands that `worker.cli.<module_name>` registers, by name."""
    module = importlib.import_module(f"worker.cli.{module_name}")
    sub = typer.Typer(rich_markup_mode=None, add_completion=False)
    module.register(sub)
    return dict(get_group(sub).commands)


app = typer.Typer(
    name="worker",
    help="Run coding agents on a queue of tasks, unattended: one unit of work per run.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,  # tracebacks never show local variables (tokens live there)
    rich_markup_mode=None,
    cls=_LazyGroup,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"worker {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Debug lines on stderr (before or after the command)."
        ),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet", "-q", help="Errors only on stderr; `run`, `serve`: no progress lines."
        ),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            dir_okay=False,
            help="A config.toml read in place of the user-wide one (also WORKER_CONFIG).",
        ),
    ] = None,
    log_level: Annotated[
        LogLevel | None,
        typer.Option(
            "--log-level",
            case_sensitive=False,
            help="worker's own diagnostics on stderr and in the run's log (default: "
            "WORKER_LOG_LEVEL, else warning).",
        ),
    ] = None,
) -> None:
    # Here, not at the top: `worker --help` never gets this far, and logging (with Rich, which
    # ui loads on first use) is a tenth of its start-up.
    import logging

    from worker.cli import ui

    if config is not None:  # as the variable, which the run's children inherit
        os.environ["WORKER_CONFIG"] = str(config.expanduser().resolve())
    level = log_level_of(verbose, quiet, log_level, os.environ.get("WORKER_LOG_LEVEL"))
    logging.basicConfig(level=level.value.upper(), handlers=[ui.LogLines(level is LogLevel.DEBUG)])


def main() -> None:
    """Console entry point: WorkerError becomes a message on stderr and its exit code."""
    collect_rarely()  # until the command has its settings (worker/cli/common.py)
    if COMPLETE_VAR in os.environ:  # the shell asks what to complete
        from worker.cli.completion import prepare

        prepare(os.environ)
    try:
        app(prog_name="worker", complete_var=COMPLETE_VAR)
    except WorkerError as exc:
        from worker.cli import ui

        ui.error(str(exc))
        sys.exit(int(exc.exit_code))
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # last resort: one line, the traceback in a file and the debug log
        import logging

        from worker.cli import ui
        from worker.process.proc import redact
        from worker.state.crashes import save_traceback

        logging.getLogger("worker").debug("internal error", exc_info=True)
        saved = save_traceback(exc, sys.argv[1:])
        where = f"the traceback is in {saved}" if saved else "run with -v for the traceback"
        ui.error(redact(f"internal error (a bug in worker): {type(exc).__name__}: {exc}; {where}"))
        sys.exit(int(ExitCode.SOFTWARE))
