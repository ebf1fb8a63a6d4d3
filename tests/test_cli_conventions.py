"""The conventions of a Python command line: exit 70 for worker's own bugs (not 1, which says
a task failed), with the traceback saved to a file the message names; the version written
once; every import declared; one atomic write; a newer database refused."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import sqlite3
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import worker
from tests.conftest import FakeAgent, run_worker, state_of, write_message
from worker.cli import app as cli_app
from worker.errors import ExitCode
from worker.state.store import CORE_MIGRATIONS


def run_main(monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    """`worker ARGV` through the console entry point (`main`), as the installed command runs."""
    monkeypatch.setattr(sys, "argv", ["worker", *argv])
    with pytest.raises(SystemExit) as exited:
        cli_app.main()
    return int(exited.value.code or 0)


def test_an_internal_error_exits_70_naming_the_saved_traceback(
    monkeypatch: pytest.MonkeyPatch, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug inside a command (here `schedule`'s renderer raising KeyError, with a token in its
    message) exits 70, not 1; stderr names the error and a file that holds the traceback, with
    the token masked in both."""
    from worker.cli import schedule

    token = "ghp_" + "A1b2C3d4" * 5

    def broken(*_args: object, **_kwargs: object) -> None:
        raise KeyError(f"no such thing {token}")

    monkeypatch.setattr(schedule, "render", broken)
    code = run_main(monkeypatch, "schedule", "cron", "-w", str(workspace))
    err = capsys.readouterr().err
    assert code == ExitCode.SOFTWARE == 70
    assert "internal error" in err and "KeyError" in err
    saved = Path(err.split("the traceback is in ")[1].split()[0].rstrip(".,;"))
    text = saved.read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in text and "in broken" in text
    assert "schedule cron" in text.splitlines()[0]
    assert token not in text and token not in err


# -- the version in one place, every import declared ----------------------------------------
ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_version_is_written_once_and_version_prints_the_package_metadata(
    cli: CliRunner,
) -> None:
    """pyproject.toml takes the version from `worker.__version__` (no second copy), and
    `worker --version` prints what the installed package's metadata says."""
    project = _pyproject()
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "worker.__version__"}
    result = cli.invoke(cli_app.app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"worker {importlib.metadata.version('worker')}"
    assert worker.__version__ == importlib.metadata.version("worker")


def _imported_modules() -> set[str]:
    """The top-level names of every absolute import in worker/, in a function's body too."""
    found: set[str] = set()
    for path in (ROOT / "worker").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"worker", "__future__"}


def test_every_package_worker_imports_is_a_declared_dependency() -> None:
    """Each third-party module worker imports belongs to a distribution pyproject.toml names
    (in the dependencies, or an extra such as `fleet` or `web`): `requests` too, which used
    to arrive only through PyGithub."""
    project = _pyproject()["project"]
    declared = [*project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        declared += extra
    names = {re.split(r"[<>=\[; ]", spec, maxsplit=1)[0].lower() for spec in declared}
    owners = importlib.metadata.packages_distributions()
    missing = {
        module: owners.get(module)
        for module in _imported_modules()
        if not {d.lower() for d in owners.get(module, [])} & names
    }
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"
    assert "requests" in {re.split(r"[<>=]", s)[0] for s in project["dependencies"]}


def test_every_rename_of_workers_files_goes_through_fsutil() -> None:
    """One atomic write and one rename, with the retry Windows needs (a sharing violation
    while an antivirus or a sync client holds the file): no module but worker/state/fsutil.py
    calls `os.replace` or `os.rename`, or writes a whole file with its own temporary file."""
    offenders = []
    for path in (ROOT / "worker").rglob("*.py"):
        if path.name == "fsutil.py" and path.parent.name == "state":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and (node.value.id, node.attr)
                in {("os", "replace"), ("os", "rename"), ("tempfile", "mkstemp")}
            ):
                offenders.append(
                    f"{path.relative_to(ROOT)}:{node.lineno} {node.value.id}.{node.attr}"
                )
    assert not offenders, offenders


def test_a_database_from_a_newer_worker_is_refused_by_a_run_and_named_by_status(
    workspace: Path, fake_claude: FakeAgent
) -> None:
    """After a downgrade: the database's core schema is at a version this worker does not
    know. `worker run` exits 78 naming both versions and what to do, and writes no row;
    `worker status` still reports (exit 0) and names the problem, in --json too."""
    write_message(workspace, "msg-1")
    assert run_worker(workspace, "run").returncode == 0
    db_path = state_of(workspace) / "worker.db"
    known = len(CORE_MIGRATIONS)
    with sqlite3.connect(db_path) as db:
        db.execute("INSERT INTO migrations VALUES ('core', ?, 0)", (known + 7,))
        runs = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    write_message(workspace, "msg-2")
    refused = run_worker(workspace, "run")
    assert refused.returncode == 78, refused.stderr
    assert f"version {known + 7}, newer than this worker" in refused.stderr
    assert f"knows (version {known})" in refused.stderr and "Upgrade worker" in refused.stderr
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == runs
    assert (workspace / "inbox" / "msg-2.json").exists()
    report = run_worker(workspace, "status")
    assert report.returncode == 0 and "state:" in report.stdout
    assert f"version {known + 7}" in report.stderr
    as_json = json.loads(run_worker(workspace, "status", "--json").stdout)
    assert "newer than this worker" in as_json["database_problems"][0]
