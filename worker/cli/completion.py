"""`worker completion bash|zsh|fish|powershell`: the script that lets the shell complete
worker's commands and options, and the answer to the shell's question (`_WORKER_COMPLETE`).

Typer's own completion (`add_completion=True`) would import its completion machinery on every
start; here it is imported only to print a script, or when the shell asks for completions.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from enum import StrEnum
from typing import Annotated

import typer

from worker.cli.common import COMPLETE_VAR

# Click 8 spells the instruction `bash_source`, Typer `source_bash`: both are taken.
_CLICK_STYLE = re.compile(r"(bash|zsh|fish|powershell|pwsh)_(source|complete)")


class Shell(StrEnum):
    BASH = "bash"
    ZSH = "zsh"
    FISH = "fish"
    POWERSHELL = "powershell"
    PWSH = "pwsh"


def completion_command(
    shell: Annotated[Shell, typer.Argument(help="bash, zsh, fish, powershell or pwsh.")],
) -> None:
    """Print the shell's completion script for worker (see the README to install it)."""
    from typer._completion_shared import get_completion_script

    typer.echo(get_completion_script(prog_name="worker", complete_var=COMPLETE_VAR, shell=shell))


def prepare(env: MutableMapping[str, str]) -> None:
    """When the shell asks for completions: Typer's shell classes registered, the request in
    Typer's spelling."""
    from typer._completion_classes import completion_init

    completion_init()
    click_style = _CLICK_STYLE.fullmatch(env[COMPLETE_VAR])
    if click_style:
        env[COMPLETE_VAR] = f"{click_style[2]}_{click_style[1]}"


def register(app: typer.Typer) -> None:
    """Add this module's commands to the main app."""
    app.command("completion")(completion_command)
