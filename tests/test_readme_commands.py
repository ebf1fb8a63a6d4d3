"""Every `worker` command the README shows exists, with every option and choice it shows.

The README is read as a user reads it: each `worker ...` in a code span or at the start of a
line of a code block. The command path (`worker waits approve`) must resolve to a command, each
`--option` (or `-o`) must be one of that command's, and values written as alternatives
(`schedule cron|systemd|windows`, `--target run|supervise`) must be its choices.
"""

from __future__ import annotations

import enum
import re
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command

from worker.cli.app import app

README = Path(__file__).resolve().parent.parent / "README.md"

_SPAN = re.compile(r"`(worker [^`\n]+)`")
_BLOCK = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_LINE = re.compile(r"^\s*(?:\$\s*)?(worker\s.*)$", re.M)
_WORD = re.compile(r"^[a-z][a-z0-9-]*$")


def _shown() -> list[str]:
    text = README.read_text(encoding="utf-8")
    found = [m.group(1) for m in _SPAN.finditer(_BLOCK.sub("", text))]
    for block in _BLOCK.finditer(text):
        found += [m.group(1).split(" #")[0].strip() for m in _LINE.finditer(block.group(1))]
    return sorted(set(found))


def _tokens(shown: str) -> list[str]:
    """Words of a shown command, brackets and quotes dropped; `a\\|b` and `a|b` kept whole."""
    text = shown.replace("\\|", "|").replace("[", " ").replace("]", " ")
    return [t.strip("'\"") for t in text.split() if t.strip("'\"")]


# Typer vendors click privately, so commands and parameters are read by their attributes:
# a group has `get_command`, a parameter `opts`, `param_type_name` and its annotation.
def _is_group(command: Any) -> bool:
    return hasattr(command, "get_command")


def _resolve(tokens: list[str]) -> tuple[list[Any], list[str], str]:
    """The commands a shown line names (more than one for `waits list|show|...`), the tokens
    after the command path, and the path itself."""
    root = get_command(app)
    assert tokens[0] == "worker"
    commands: list[Any] = [root]
    path = "worker"
    rest = tokens[1:]
    while rest and _is_group(commands[0]) and not rest[0].startswith("-"):
        names = rest[0].split("|")
        if not all(_WORD.match(n) for n in names):
            break
        found = [commands[0].get_command(None, n) for n in names]
        if found[0] is None and len(names) == 1 and commands[0] is not root:
            break  # an argument of a group's default command, not a sub-command
        missing = [n for n, cmd in zip(names, found, strict=True) if cmd is None]
        assert not missing, f"`{path} {rest[0]}`: no such command {missing}"
        commands = [cmd for cmd in found if cmd is not None]
        path = f"{path} {rest[0]}"
        rest = rest[1:]
    return commands, rest, path


def _check_options(command: Any, rest: list[str], path: str) -> None:
    # The root's options (-v, --quiet, --log-level) are taken after any command too.
    owners = [get_command(app), command]
    params = {opt: p for c in owners for p in c.params for opt in (*p.opts, *p.secondary_opts)}
    params.setdefault("--help", None)
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    for i, token in enumerate(rest):
        if token.startswith("-") and token != "-":
            for alternative in token.split("|"):
                name = alternative.split("=")[0]
                assert name in params, f"`{path}` has no option {name} (README shows {token})"
                param = params[name]
                value = rest[i + 1] if i + 1 < len(rest) else ""
                if param is not None and "|" in value:
                    _check_choices(param, value, f"{path} {name}")
        elif "|" in token and all(_WORD.match(v) for v in token.split("|")):
            previous = rest[i - 1] if i else ""
            if previous.startswith("-"):
                continue  # the values of the option before, checked there
            choices = [a for a in arguments if _choices(a) is not None]
            assert choices, f"`{path}` shows alternatives {token} but takes no choice argument"
            _check_choices(choices[0], token, path)


def _choices(param: Any) -> set[str] | None:
    """The values of a parameter typed by an enum; None for any other (a string option that
    the command checks itself, such as `--by`, is not checked here)."""
    annotation = param.type_descriptor.annotation
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {str(member.value) for member in annotation}
    return None


def _check_choices(param: Any, value: str, where: str) -> None:
    allowed = _choices(param)
    if allowed is None:
        return
    wrong = [v for v in value.split("|") if v not in allowed]
    assert not wrong, f"`{where}` does not take {wrong}; it takes {sorted(allowed)}"


SHOWN = _shown()


def test_the_readme_shows_commands() -> None:
    """The reader below finds the README's commands (a change of format would hide them)."""
    assert len(SHOWN) > 40
    assert "worker run --dry-run" in SHOWN


@pytest.mark.parametrize("shown", SHOWN)
def test_a_command_the_readme_shows_exists_with_its_options(shown: str) -> None:
    commands, rest, path = _resolve(_tokens(shown))
    for command in commands:
        _check_options(command, rest, path)


def test_the_checks_fail_on_a_wrong_command_option_or_choice() -> None:
    """The checker can fail: an unknown command, option and choice are each caught."""
    for wrong in (
        "worker rnu",
        "worker waits approve|bless ID",
        "worker run --dry-runn",
        "worker schedule cron|launchd",
        "worker schedule cron --target run|daemon",
    ):
        with pytest.raises(AssertionError):
            commands, rest, path = _resolve(_tokens(wrong))
            for command in commands:
                _check_options(command, rest, path)
