"""How the project runs its own checks, found the way a person new to it would: configured
commands first (`[fallback] build`, `test`), then the project's own Python environment
(`.venv`, `venv`, uv, Poetry, Hatch, tox, nox), a Makefile `test` target, `npm test`, `cargo
test`, `go test`, and last the Python on PATH.

project_checks.py re-exports `detect_plan`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from worker.config import Settings
from worker.process.lazyimport import lazy
from worker.sources.project_plan import MAKEFILES, PYTHON_MARKERS, CheckPlan

_gitview = lazy("worker.process.gitview")  # its `read_data`: the tree's files read as data

_TEST_TARGET = re.compile(r"^test\s*:", re.M)
# npm's `npm init` writes this test script: it only says there are no tests.
_NPM_PLACEHOLDER = "no test specified"


def detect_plan(settings: Settings) -> CheckPlan:
    """How maintenance checks this workspace (configured commands win)."""
    conf = settings.fallback
    if conf.build is not None or conf.test is not None:
        commands = [*(conf.build or []), *(conf.test or [])]
        return CheckPlan("the configured commands ([fallback] build, test)", commands)
    workspace = settings.workspace
    python = any((workspace / marker).is_file() for marker in PYTHON_MARKERS)
    for detector in (*(_PYTHON_TOOLS if python else ()), _make, _npm, _cargo, _go):
        plan = detector(workspace)
        if plan is not None:
            return plan
    if python:
        return _python_on_path()
    return CheckPlan("none", [])


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
    for name in MAKEFILES:
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
