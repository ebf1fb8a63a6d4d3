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
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from worker.config import Settings
from worker.errors import WorkerError
from worker.process.lazyimport import lazy

_proc = lazy("worker.process.proc")  # only to ask an interpreter (a dry run, doctor), never to list
_programs = lazy("worker.sandbox.programs")  # the same: the box it is asked in
_gitview = lazy("worker.process.gitview")  # its `read_data`: the tree's files read as data

_PYTHON_MARKERS = (
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "tox.ini",
    "noxfile.py",
    "pytest.ini",
    "requirements.txt",
)
_MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
_TEST_TARGET = re.compile(r"^test\s*:", re.M)
# npm's `npm init` writes this test script: it only says there are no tests.
_NPM_PLACEHOLDER = "no test specified"
# What the fingerprint watches besides the commands: a change to any of these may fix a
# set-up problem, so the remembered one is tried again at the next run.
_WATCHED = (
    *_PYTHON_MARKERS,
    *_MAKEFILES,
    "uv.lock",
    "poetry.lock",
    "hatch.toml",
    "package.json",
    "package-lock.json",
    "node_modules",
    "Cargo.toml",
    "go.mod",
    ".venv",
    ".venv/pyvenv.cfg",
    "venv",
    "venv/pyvenv.cfg",
)


_HAS_MODULE = (
    "import importlib.util as u, sys; sys.exit(3 if u.find_spec(sys.argv[1]) is None else 0)"
)
_PROBE_TIMEOUT_S = 30.0  # an interpreter's start; one that hangs is no answer


@dataclass(frozen=True)
class CheckPlan:
    """The checks maintenance runs: where (in words), what, and why they cannot run."""

    environment: str
    commands: list[str]
    problem: str | None = None  # found before running anything: no command needs to run
    own_env: bool = True  # False: no environment of the project's own was found

    def fingerprint(self, workspace: Path) -> str:
        """Changes when anything that decides how the checks run changes: the commands, the
        project's markers, its environment's installed packages, the tools on PATH."""
        watched = [*_WATCHED, *_site_packages(workspace)]
        stats = {name: _stat(workspace / name) for name in watched}
        tools = {tool: shutil.which(tool) for tool in sorted(_tools(self.commands))}
        data = [self.environment, self.commands, self.problem, stats, tools]
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def detect_plan(settings: Settings) -> CheckPlan:
    """How maintenance checks this workspace (configured commands win)."""
    conf = settings.fallback
    if conf.build is not None or conf.test is not None:
        commands = [*(conf.build or []), *(conf.test or [])]
        return CheckPlan("the configured commands ([fallback] build, test)", commands)
    workspace = settings.workspace
    python = any((workspace / marker).is_file() for marker in _PYTHON_MARKERS)
    for detector in (*(_PYTHON_TOOLS if python else ()), _make, _npm, _cargo, _go):
        plan = detector(workspace)
        if plan is not None:
            return plan
    if python:
        return _python_on_path()
    return CheckPlan("none", [])


def probe(commands: list[str], settings: Settings) -> str | None:
    """Ask each `PYTHON -m MODULE` check's interpreter whether it has the module, without
    running it (a dry run's and doctor's look), in the box the checks run in (the tree's
    interpreter is the agent's to replace): the set-up problem in words, or None."""
    for command in commands:
        module = _module_of(command)
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


def cannot_run(
    command: str, exit_code: int | None, output: str, *, own_env: bool, boxed: bool = False
) -> str | None:
    """Why a check that did not pass never really ran (a set-up problem, in words), or None
    when it ran and failed (a task for the agent). `boxed`: it ran in the sandbox, whose
    refusal of a write (a cache in the home folder) is the operator's to allow."""
    last = _last_line(output)
    if exit_code is None:
        return f"`{command}` could not be started: {last}"
    if exit_code in (126, 127, 9009):  # POSIX shells' "not executable", "not found"; cmd.exe's
        return f"`{command}` needs a program that is not installed or not executable: {last}"
    module = _module_of(command)
    missing = re.search(r"No module named '?([\w.]+)'?", output)
    if module and missing and missing.group(1) == module:
        python = command.split(" -m ", 1)[0].strip()
        return (
            f"`{command}`: this Python has no module {module}; install it there "
            f"(`{python} -m pip install {module}`)"
        )
    if exit_code == 5 and "no tests ran" in output:  # pytest's exit code 5: none collected
        return f"`{command}` collected no tests"
    refused = _READ_ONLY.search(output) if boxed else None
    if refused:
        return (
            f"`{command}` writes where the sandbox refuses ({_line_at(output, refused.start())}): "
            "add that folder to [sandbox] allow_write"
        )
    # The line that shows it, not the last one: a summary's timing would make each try's
    # words differ, and the same problem must read the same to be told once.
    for pattern, words in _SETUP_OUTPUT:
        found = re.search(pattern, output, re.M)
        if found:
            return f"`{command}`: {words} ({_line_at(output, found.start())})"
    found = _IMPORT_FAILED.search(output) if not own_env else None
    if found:
        # Not the project's environment: a package it lacks is a set-up problem, not a bug.
        where = _line_at(output, found.start())
        return f"`{command}` ran outside the project's environment, which lacks a package ({where})"
    return None


_READ_ONLY = re.compile(r"[Rr]ead-only file system")
_IMPORT_FAILED = re.compile(r"^E\s+ModuleNotFoundError|^ImportError while importing", re.M)
_SETUP_OUTPUT: list[tuple[str, str]] = [
    (r"Missing script: \"?test", "package.json has no test script"),
    (r"No rule to make target '?test", "the Makefile has no test target"),
    (r"\*\*\* \[[^\]]*\] Error 127", "a program its recipe runs is not installed"),
    (r"Failed to spawn: `", "uv cannot find the command in the project's environment"),
    (r"^Command not found: ", "Poetry cannot find the command in the project's environment"),
    (r"is not recognized as an internal or external command", "a program is not installed"),
    (r"InterpreterNotFound|[Ii]nterpreter \S+ not found", "an interpreter it needs is missing"),
]


# -- detectors: each returns a plan, or None when the project does not use that way ----------
def _venv(workspace: Path) -> CheckPlan | None:
    for name in (".venv", "venv"):
        folder = workspace / name
        if not (folder / "pyvenv.cfg").is_file():
            continue
        python = folder / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
        where = f"the project's virtual environment {name}"
        command = f"{_quote(python)} -m pytest -q"
        if not python.exists():  # a broken link too: its base interpreter was removed
            problem = f"{where} has no working interpreter ({python}): recreate it"
            return CheckPlan(where, [command], problem)
        return CheckPlan(where, [command])
    return None


def _tool(
    tool: str, marker: Callable[[Path], bool], label: str, command: str
) -> Callable[[Path], CheckPlan | None]:
    def detect(workspace: Path) -> CheckPlan | None:
        if not marker(workspace):
            return None
        return _needs(tool, f"{label} (`{tool}`)", [command])

    return detect


def _pyproject_has(table: str) -> Callable[[Path], bool]:
    def has(workspace: Path) -> bool:
        return f"[{table}" in _text(workspace / "pyproject.toml")

    return has


def _either(*checks: Callable[[Path], bool]) -> Callable[[Path], bool]:
    return lambda workspace: any(check(workspace) for check in checks)


def _file(name: str) -> Callable[[Path], bool]:
    return lambda workspace: (workspace / name).is_file()


_PYTHON_TOOLS: tuple[Callable[[Path], CheckPlan | None], ...] = (
    _venv,
    _tool("uv", _file("uv.lock"), "uv's project environment", "uv run pytest -q"),
    _tool(
        "poetry",
        _either(_file("poetry.lock"), _pyproject_has("tool.poetry")),
        "Poetry's environment",
        "poetry run pytest -q",
    ),
    _tool(
        "hatch",
        _either(_file("hatch.toml"), _pyproject_has("tool.hatch.envs")),
        "Hatch's test environment",
        "hatch test",
    ),
    _tool(
        "tox", _either(_file("tox.ini"), _pyproject_has("tool.tox")), "tox's environments", "tox"
    ),
    _tool("nox", _file("noxfile.py"), "nox's sessions", "nox"),
)


def _make(workspace: Path) -> CheckPlan | None:
    for name in _MAKEFILES:
        if _TEST_TARGET.search(_text(workspace / name)):
            return _needs("make", f"the {name}'s test target", ["make test"])
    return None


def _npm(workspace: Path) -> CheckPlan | None:
    path = workspace / "package.json"
    if not path.is_file():
        return None
    plan = _needs("npm", "npm's scripts", ["npm run build --if-present", "npm test"])
    try:
        scripts = json.loads(_text(path)).get("scripts") or {}
    except (ValueError, AttributeError):
        scripts = {}
    test = scripts.get("test") if isinstance(scripts, dict) else None
    problem = plan.problem
    if not isinstance(test, str) or _NPM_PLACEHOLDER in test:
        problem = "package.json has no test script (npm test would run nothing)"
    elif problem is None and not (workspace / "node_modules").is_dir():
        problem = "node_modules is missing: install the dependencies (npm ci)"
    return CheckPlan(plan.environment, plan.commands, problem)


def _cargo(workspace: Path) -> CheckPlan | None:
    if not (workspace / "Cargo.toml").is_file():
        return None
    return _needs("cargo", "Cargo", ["cargo build", "cargo test"])


def _go(workspace: Path) -> CheckPlan | None:
    if not (workspace / "go.mod").is_file():
        return None
    return _needs("go", "Go", ["go build ./...", "go test ./..."])


def _python_on_path() -> CheckPlan:
    """A Python project with no environment of its own: the Python on PATH, said plainly."""
    for name in ("python", "python3"):
        found = shutil.which(name)
        if found is None:
            continue
        own = Path(found).parent.resolve() == Path(sys.executable).parent.resolve()
        whose = "worker's own environment, not the project's" if own else "not the project's own"
        where = f"the Python on PATH ({found}; {whose})"
        return CheckPlan(where, [f"{name} -m pytest -q"], own_env=False)
    problem = "no Python on PATH, and no .venv, venv, uv, Poetry, Hatch, tox or nox set-up"
    return CheckPlan("none", ["python -m pytest -q"], problem, own_env=False)


# -- helpers ----------------------------------------------------------------------------------
def _text(path: Path) -> str:
    """A file of the tree as data: the file itself, never where a link of the agent's points
    (a FIFO, a device, a file of the operator's), capped; "" when it is no such file."""
    return (_gitview.read_data(path) or b"").decode("utf-8", "replace")


def _needs(tool: str, environment: str, commands: list[str]) -> CheckPlan:
    if shutil.which(tool) is not None:
        return CheckPlan(environment, commands)
    path = os.environ.get("PATH", "")
    return CheckPlan(environment, commands, f"`{tool}` is not on PATH ({path})")


def _quote(path: Path) -> str:
    text = str(path)
    if sys.platform == "win32":
        return f'"{text}"' if " " in text else text
    return shlex.quote(text)


def _module_of(command: str) -> str | None:
    match = re.search(r"(?:^|\s)-m\s+([\w.]+)", command)
    return match.group(1) if match else None


def _line_at(output: str, index: int) -> str:
    start = output.rfind("\n", 0, index) + 1
    end = output.find("\n", index)
    return output[start : end if end >= 0 else len(output)].strip()[:300]


def _last_line(output: str) -> str:
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def _tools(commands: list[str]) -> set[str]:
    found = {"python", "python3"}
    for command in commands:
        words = command.split()
        if words and os.sep not in words[0]:
            found.add(words[0])
    return found


def _site_packages(workspace: Path) -> list[str]:
    """The environments' package folders: installing a package changes their time."""
    found = []
    for name in (".venv", "venv"):
        for pattern in ("lib/python*/site-packages", "Lib/site-packages"):
            found += [p.relative_to(workspace).as_posix() for p in (workspace / name).glob(pattern)]
    return found


def _stat(path: Path) -> list[int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return [info.st_mtime_ns, info.st_size]
