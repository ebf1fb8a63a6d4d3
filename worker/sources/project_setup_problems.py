"""A finished check read for a set-up problem: a command or module that is missing, no tests
collected, an interpreter that is gone, a write the sandbox refused is a problem for a person,
never a failure for an agent.

project_checks.py re-exports `cannot_run`.
"""

from __future__ import annotations

import re


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
    module = module_of(command)
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


def module_of(command: str) -> str | None:
    match = re.search(r"(?:^|\s)-m\s+([\w.]+)", command)
    return match.group(1) if match else None


def _line_at(output: str, index: int) -> str:
    start = output.rfind("\n", 0, index) + 1
    end = output.find("\n", index)
    return output[start : end if end >= 0 else len(output)].strip()[:300]


def _last_line(output: str) -> str:
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"
