"""Shell completion through the protocol the shells use (`_WORKER_COMPLETE`, as Typer's
scripts set it): `worker ru` completes to `run` in bash, zsh, fish and PowerShell, and the
script `worker completion bash` prints completes it in a real bash."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def ask(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real command with the shell's completion request in its environment."""
    return subprocess.run(
        [sys.executable, "-m", "worker"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("shell", "env", "expected"),
    [
        ("bash", {"COMP_WORDS": "worker ru", "COMP_CWORD": "1"}, "run"),
        ("zsh", {"_TYPER_COMPLETE_ARGS": "worker ru"}, '"run":'),
        (
            "fish",
            {"_TYPER_COMPLETE_ARGS": "worker ru", "_TYPER_COMPLETE_FISH_ACTION": "get-args"},
            "run\t",
        ),
        (
            "powershell",
            {"_TYPER_COMPLETE_ARGS": "worker ru", "_TYPER_COMPLETE_WORD_TO_COMPLETE": "ru"},
            "run:::",
        ),
    ],
)
def test_worker_ru_completes_to_run_in_every_shell(
    shell: str, env: dict[str, str], expected: str
) -> None:
    """Each shell's request, in Typer's spelling (`complete_SHELL`), gets `run` and nothing
    else (`ru` starts no other command)."""
    answer = ask({"_WORKER_COMPLETE": f"complete_{shell}", **env})
    assert answer.returncode == 0, answer.stderr
    assert expected in answer.stdout
    assert "status" not in answer.stdout and "log" not in answer.stdout


def test_clicks_spelling_of_the_request_is_taken_too() -> None:
    """`bash_source` (Click 8's order) once printed "Shell source not supported"."""
    source = ask({"_WORKER_COMPLETE": "bash_source"})
    complete = ask(
        {"_WORKER_COMPLETE": "bash_complete", "COMP_WORDS": "worker run --dr", "COMP_CWORD": "2"}
    )
    assert source.returncode == 0 and "_worker_completion" in source.stdout
    assert complete.returncode == 0 and complete.stdout.split() == ["--dry-run"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_printed_bash_script_completes_in_a_real_bash(tmp_path: Path) -> None:
    """`eval "$(worker completion bash)"` in bash, then the completion function the script
    registers for `worker ru<TAB>` fills COMPREPLY with `run`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "worker"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m worker "$@"\n')
    wrapper.chmod(0o755)
    script = (
        'eval "$(worker completion bash)"\n'
        "complete -p worker\n"
        "COMP_WORDS=(worker ru); COMP_CWORD=1; _worker_completion worker ru worker\n"
        'echo "reply: ${COMPREPLY[*]}"\n'
    )
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "_worker_completion worker" in done.stdout  # registered for the command
    assert "reply: run" in done.stdout.splitlines()


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish", "powershell", "pwsh"])
def test_completion_prints_each_shells_script(shell: str) -> None:
    """`worker completion SHELL` prints a script that asks worker through _WORKER_COMPLETE."""
    done = subprocess.run(
        [sys.executable, "-m", "worker", "completion", shell],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "_WORKER_COMPLETE" in done.stdout and "worker" in done.stdout
