"""Edits that keep failing on one file, whatever their arguments (issue 41).

An agent whose edit tool fails on the same file again and again, each time with another
`old_str`, is stuck even though no two calls and no two error texts are alike: the repeated
error check keys on those. Here each file has its streak of failed edits. Another failing
edit (of it or of another file) and a read of the file between the failures leave the streak
as it is: reading before trying again is what an agent stuck on an edit does. A successful
edit of the file ends it, and so does a passing check (a test, build or linter run that
works), which says the agent's edits are where it wants them.

What is an edit, and of which file, is told from the call: the edit tools of Claude Code,
Codex, Gemini CLI, OpenHands, SWE-agent and Roo Code by name (an editor tool by its `command`),
OpenHands' agentskills (`edit_file_by_replace(...)` in its IPython cell), SWE-agent's windowed
`edit N:M` (of the file it last opened) and a shell's `sed -i`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from worker.supervision.signals import short

# Tools that only edit (their argument names the file).
_EDITORS = frozenset(
    {
        "edit",
        "multiedit",
        "write",
        "notebookedit",  # Claude Code
        "replace",
        "write_file",
        "edit_file",  # Gemini CLI
        "file_change",
        "apply_patch",  # Codex
        "apply_diff",
        "write_to_file",
        "search_and_replace",
        "insert_content",  # Roo Code
        "create_file",
        "str_replace",
    }
)
# Tools that view or edit, by their `command` argument (OpenHands, SWE-agent, Anthropic's).
_EDITOR_TOOLS = frozenset({"str_replace_editor", "file_editor", "str_replace_based_edit_tool"})
_EDIT_COMMANDS = frozenset({"str_replace", "insert", "create", "undo_edit", "edit", "write"})
_PATH_KEYS = (
    "file_path",
    "path",
    "filePath",
    "absolute_path",
    "notebook_path",
    "file",
    "target_file",
)
_SHELLS = ("command", "cmd", "code", "script")
# OpenHands' agentskills called from its IPython tool, and a shell's in-place sed.
_SKILL = re.compile(
    r"\b(?:edit_file_by_replace|edit_file_by_line_range|insert_content_at_line|append_file"
    r"|edit_file)\(\s*(?:file_name\s*=\s*)?[\"']([^\"']+)[\"']"
)
_SED = re.compile(r"^\s*sed\s+(?:-[a-zA-Z]*\s+)*-[a-zA-Z]*i\b[^\n;&|]*?\s([\w./~-]+)\s*$")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")  # a sed script, whatever it holds
# SWE-agent's commands: `edit 12:14` edits the file `open` or `create` last named.
_OPENS = frozenset({"open", "create"})
# A check whose passing says the edits are in: tests, a build, a type checker or linter, run
# as a command (first, or after `;`, `&&`, `|`, `(`, an environment or a runner such as
# `uv run`), not named as an argument (`grep -r pytest .`).
_CHECK = re.compile(
    r"(?i)(?:^|[;&|(]|\n)\s*(?:\w+=\S*\s+)*(?:(?:uv|poetry|pipenv|pdm|hatch)\s+run\s+|npx\s+"
    r"|bunx\s+|timeout\s+\d+\s+)?(?:pytest|py\.test|tox|nox|jest|vitest|mocha|tsc|mypy|pyright"
    r"|ruff|flake8|pylint|eslint|cargo\s+(?:test|build|check|clippy)|go\s+(?:test|build|vet)"
    r"|(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:test|build|lint|typecheck|check)|make|gradle\w*"
    r"|\./gradlew|mvn|dotnet\s+(?:test|build)|python3?\s+-m\s+(?:pytest|unittest|mypy))\b"
)
_MOST = 64  # files with a streak kept at once: the oldest goes first


def edit_target(tool: str, args: dict[str, Any] | None, opened: str = "") -> str | None:
    """The file a call edits, or None for a call that edits none (a read, a search, a run)."""
    args = args or {}
    name = tool.lower()
    if name in _EDITORS or (name in _EDITOR_TOOLS and args.get("command") in _EDIT_COMMANDS):
        path = _path(args)
        if path is not None:
            return path
    for key in _SHELLS:  # a shell, or a SWE-agent action (its tool is the first word)
        value = args.get(key)
        if isinstance(value, str) and value:
            return _command_target(value[:2000], opened)
    return None


def _path(args: dict[str, Any]) -> str | None:
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            return value[:300]
    changes = args.get("changes")  # Codex's file_change
    if isinstance(changes, list) and changes and isinstance(changes[0], dict):
        path = changes[0].get("path")
        return str(path)[:300] if path else None
    return None


@lru_cache(maxsize=512)
def _command_target(command: str, opened: str) -> str | None:
    """The file a shell command or a SWE-agent action edits."""
    if not ("sed" in command or "_file" in command or "_at_line" in command) and (
        command.lstrip()[:4] not in ("str_", "file", "edit")
    ):
        return None  # most commands, told by substring checks
    words = command.split(None, 3)
    first = words[0] if words else ""
    if first in _EDITOR_TOOLS and len(words) > 2 and words[1] in _EDIT_COMMANDS:
        return words[2]  # SWE-agent: `str_replace_editor str_replace /path --old_str ...`
    if first == "edit" and len(words) > 1 and words[1][:1].isdigit():
        return opened or None  # SWE-agent's windowed edit of the open file
    found = _SKILL.search(command) or _SED.match(_QUOTED.sub("''", command))
    return found.group(1) if found else None


def opened_file(args: dict[str, Any] | None) -> str | None:
    """The file a SWE-agent `open`/`create` action names, which its `edit N:M` then edits."""
    command = (args or {}).get("command")
    if not isinstance(command, str):
        return None
    words = command.split(None, 2)
    if len(words) > 1 and words[0] in _OPENS:
        return words[1].strip("\"'")
    return None


def is_check(args: dict[str, Any] | None) -> bool:
    """A shell call that runs tests, a build, a type checker or a linter."""
    for key in _SHELLS:
        value = (args or {}).get(key)
        if isinstance(value, str) and _CHECK.search(value[:500]):
            return True
    return False


class EditStreaks:
    """Each file's streak of failed edits: (count, seq and line of the first, last message)."""

    __slots__ = ("_opened", "_streaks")

    def __init__(self) -> None:
        self._streaks: dict[str, tuple[int, int, int, str]] = {}
        self._opened = ""

    def result(
        self,
        tool: str,
        args: dict[str, Any] | None,
        failed: bool,
        message: str,
        seq: int,
        line: int,
    ) -> tuple[str, int, int, int, str] | None:
        """Count one result; for a failed edit, its file's streak (file, count, seq and line
        of its first failure, the tool's message), else None."""
        target = edit_target(tool, args, self._opened)
        if target is None:
            if not failed:
                self._other(args)
            return None
        if not failed:
            self._streaks.pop(target, None)
            return None
        count, start, first, _ = self._streaks.pop(target, (0, seq, line, ""))
        if len(self._streaks) >= _MOST:
            del self._streaks[next(iter(self._streaks))]
        streak = self._streaks[target] = (count + 1, start, first, short(message, 120))
        return (target, *streak)

    def _other(self, args: dict[str, Any] | None) -> None:
        """A call that worked and edits nothing: a file opened, or a check that passed."""
        opened = opened_file(args)
        if opened is not None:
            self._opened = opened
        elif self._streaks and is_check(args):
            self._streaks.clear()
