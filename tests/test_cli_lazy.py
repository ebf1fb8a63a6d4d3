"""The lazy command loader: `worker --help` lists every command without importing its module,
a command imports its own module only, and the listed help is the module's own."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.core import TyperCommand

from worker.cli.app import COMMANDS, load_commands

_MODULES = sorted({module for module, _text in COMMANDS.values()})


def _loaded_after(argv: list[str]) -> set[str]:
    """The `worker.cli.*` command modules imported by running `worker ARGV` in a fresh process."""
    code = (
        "import sys\n"
        "from worker.cli.app import app\n"
        f"sys.argv = ['worker', *{argv!r}]\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('worker.cli.'))))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    return {name.removeprefix("worker.cli.") for name in last.split()} - {"app", "common", "ui"}


@pytest.mark.parametrize("module", _MODULES)
def test_the_table_names_each_modules_commands_with_their_own_help(module: str) -> None:
    """A command added to a module, or a docstring changed, without the table fails here."""
    real = load_commands(module)
    listed = {name for name, (mod, _text) in COMMANDS.items() if mod == module}
    assert set(real) == listed
    for name in listed:
        pending = TyperCommand(name=name, help=COMMANDS[name][1], callback=None)
        for limit in (20, 45, 74, 120, 1000):
            assert pending.get_short_help_str(limit) == real[name].get_short_help_str(limit)
        assert real[name].hidden is False


def test_help_lists_every_command_without_importing_any() -> None:
    assert _loaded_after(["--help"]) == set()


def test_a_command_imports_its_own_module_only() -> None:
    assert _loaded_after(["why", "--help"]) == {"why"}
    assert _loaded_after(["knowledge", "--help"]) == {"directives"}


def test_a_mistyped_command_is_still_named_with_a_suggestion() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "worker", "wiats"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "No such command 'wiats'. Did you mean 'waits'?" in proc.stderr
