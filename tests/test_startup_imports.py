"""Start-up stays light without changing what children see: Rich only when something is
printed through it, no xml.sax for the Task Scheduler XML, and pydantic's plugin scan off in
worker's own process only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from xml.sax.saxutils import escape as sax_escape

import pytest

from worker.platform.schedule import escape


def _modules_after(code: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env=env,
    )
    return proc.stdout.strip().splitlines()[-1]


def test_a_json_dry_run_loads_neither_rich_nor_xml_sax(workspace: Path) -> None:
    code = (
        "import sys\n"
        "from worker.cli.app import app\n"
        f"sys.argv = ['worker', 'run', '--dry-run', '--json', '--workspace', {str(workspace)!r}]\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rich' or m == 'xml.sax'))\n"
    )
    assert _modules_after(code) == "[]"


@pytest.mark.parametrize("text", ["a & b", "<Command>", "x > y < z", "&amp;", "plain"])
def test_the_task_scheduler_escape_is_xml_sax_s(text: str) -> None:
    assert escape(text) == sax_escape(text)


def test_children_get_the_environment_worker_started_with() -> None:
    """worker switches pydantic's plugin scan off for itself; its children (agents, the
    projects they test) do not inherit the switch, unless the operator set it."""
    code = (
        "import os, worker\n"
        "from worker.proc import child_env\n"
        "child = child_env()\n"
        "print(os.environ.get('PYDANTIC_DISABLE_PLUGINS'), "
        "child.get('PYDANTIC_DISABLE_PLUGINS'), "
        "[k for k in child if k.startswith('PYDANTIC')])\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYDANTIC")}
    assert _modules_after(code, env) == "__all__ None []"
    env["PYDANTIC_DISABLE_PLUGINS"] = "logfire"
    assert _modules_after(code, env) == "logfire logfire ['PYDANTIC_DISABLE_PLUGINS']"
    # A `worker serve` started by `worker supervise` inherits the switch with worker's mark.
    env.update(
        dict.fromkeys(
            ("PYDANTIC_DISABLE_PLUGINS", "PYDANTIC_DISABLE_PLUGINS_SET_BY_WORKER"), "__all__"
        )
    )
    assert _modules_after(code, env) == "__all__ None []"
