"""How the project runs its own checks, and whether a check could run at all.

`detect_plan` looks at the workspace the way a person new to it would: configured commands
first (`[fallback] build`, `test`), then the project's own Python environment (`.venv`,
`venv`, uv, Poetry, Hatch, tox, nox), a Makefile `test` target, `npm test`, `cargo test`,
`go test`, and last the Python on PATH. The plan names the environment in words (the dry run
and `worker doctor` show it), and a problem found before anything runs (a tool that is not
installed, an environment without its interpreter).

`cannot_run` reads a finished check: a command or module that is missing, no tests collected,
an interpreter that is gone is a set-up problem for a person, never a failure for an agent.
Both are pure but for a few `stat` calls and PATH look-ups.

Here: the interpreter asked before anything runs (`probe`, `where_words`); the plan is in
project_plan.py, its detection in project_detect.py, the reading of a finished check in
project_setup_problems.py, their names re-exported here.
"""

from __future__ import annotations

import shlex
import sys

from worker.config import Settings
from worker.errors import WorkerError
from worker.process.lazyimport import lazy
from worker.sources.project_detect import detect_plan
from worker.sources.project_plan import CheckPlan
from worker.sources.project_setup_problems import cannot_run, module_of

__all__ = ["CheckPlan", "cannot_run", "detect_plan", "probe", "where_words"]

_proc = lazy("worker.process.proc")  # only to ask an interpreter (a dry run, doctor), never to list
_programs = lazy("worker.sandbox.programs")  # the same: the box it is asked in

_HAS_MODULE = (
    "import importlib.util as u, sys; sys.exit(3 if u.find_spec(sys.argv[1]) is None else 0)"
)
_PROBE_TIMEOUT_S = 30.0  # an interpreter's start; one that hangs is no answer


def probe(commands: list[str], settings: Settings) -> str | None:
    """Ask each `PYTHON -m MODULE` check's interpreter whether it has the module, without
    running it (a dry run's and doctor's look), in the box the checks run in (the tree's
    interpreter is the agent's to replace): the set-up problem in words, or None."""
    for command in commands:
        module = module_of(command)
        posix = sys.platform != "win32"
        words = [word if posix else word.strip('"') for word in shlex.split(command, posix=posix)]
        if module is None or len(words) < 3 or words[1:3] != ["-m", module]:
            continue
        argv = [words[0], "-c", _HAS_MODULE, module]
        try:
            where = _programs.place(settings)
        except WorkerError as exc:
            return str(exc)
        with _programs.boxed(where, argv, settings.workspace) as (boxed, env):
            result = _proc.run_process(
                boxed, cwd=settings.workspace, timeout_s=_PROBE_TIMEOUT_S, env=env
            )
        if (
            result.not_found
            or result.exit_code == 127
            or _programs.unstarted(result.exit_code, result.stderr_tail)
        ):
            return f"`{words[0]}` cannot be started"
        if result.exit_code == 3:
            return f"`{command}`: this Python has no module {module}; install it there"
    return None


def where_words(settings: Settings) -> str:
    """Where the checks would run, in words (a dry run, `worker doctor`)."""
    try:
        return str(_programs.place(settings).words)
    except WorkerError as exc:
        return f"nowhere: {exc}"
