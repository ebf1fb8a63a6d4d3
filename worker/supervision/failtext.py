"""Failures told from a result's text, for results that carry no error flag.

Several formats mark no failure on these observations: an OpenHands `str_replace_editor`
observation, a SWE-agent step, a Claude Code `Bash` whose `cd` failed before a `;`. Their tools
word the failure in well-known ways, looked up in each project's source:

* OpenHands (openhands-aci) and SWE-agent (`str_replace_editor`, edit_anthropic): "No
  replacement was performed, old_str `...` did not appear verbatim in PATH.", "No replacement
  was performed. Multiple occurrences of old_str ...", "Parameter `old_str` is required for
  command: str_replace".
* SWE-agent's windowed `edit` and OpenHands' agentskills (`edit_file_by_replace`): "Your
  proposed edit has introduced new syntax error(s)" (the latter in brackets); the agentskills'
  "[No exact match found in PATH for ...]".
* Claude Code's Edit: "String to replace not found in file.", "Found N matches of the string
  to replace, but replace_all is false", "File has not been read yet", "File has been modified
  since read".
* Gemini CLI's `replace`: "Failed to edit, could not find the string to replace.", "Failed to
  edit, 0 occurrences found ...", "Failed to edit, expected N occurrences but found M".
* Codex's `apply_patch`: "Failed to find expected lines in PATH", "apply_patch verification
  failed".
* Roo Code's `apply_diff`: "No sufficiently similar match found".
* Shells: a `cd` that failed ("cd: DIR: No such file or directory" of bash, "can't cd to DIR"
  of dash, "cd: no such file or directory: DIR" of zsh) or a program not found, on the first
  lines of the output, whatever a later part of a compound command (`cd x; ls`) returned.

Only the first lines of a result are read (after a tool's banner such as "ERROR:"), so a file
that merely quotes one of these messages (a read of this module) is no failure.
"""

from __future__ import annotations

import re
from functools import lru_cache

# (the well-known wording, the message it is named by: the failure's signature, the tool's own
# words without the arguments it quotes back).
_MESSAGES = (
    (
        r"no replacement (?:was )?performed[,.]? old_str\b.*?did not appear verbatim",
        "No replacement was performed, old_str did not appear verbatim",
    ),
    (
        r"no replacement (?:was )?performed\. multiple occurrences",
        "No replacement was performed. Multiple occurrences of old_str",
    ),
    (r"parameter `?old_str`? is (?:required|empty) for command", "Parameter old_str is required"),
    (r"parameter `?new_str`? is (?:required|empty) for command", "Parameter new_str is required"),
    (r"\[?no exact match found in .* for\b", "No exact match found"),
    (
        r"\[?your proposed edit has introduced new syntax error",
        "Your proposed edit has introduced new syntax error(s)",
    ),
    (r"string to replace not found in file", "String to replace not found in file"),
    (
        r"found \d+ matches of the string to replace, but replace_all is false",
        "Found several matches of the string to replace, but replace_all is false",
    ),
    (r"file has not been read yet\. read it first", "File has not been read yet"),
    (r"file has been modified since read", "File has been modified since read"),
    (r"(?:error executing tool \w+: )?(?:error: )?failed to edit[,.]", "Failed to edit"),
    (
        r"(?:apply_patch verification failed: )?failed to find expected lines",
        "Failed to find expected lines",
    ),
    (r"apply_patch verification failed", "apply_patch verification failed"),
    (r"no sufficiently similar match found", "No sufficiently similar match found"),
)
_EDIT = re.compile("|".join(f"({pattern})" for pattern, _ in _MESSAGES), re.I)
_NAMES = tuple(name for _, name in _MESSAGES)
# A shell's own failure on an output's first lines: `bash: line 1: cd: x: No such file or
# directory`, `sh: 1: cd: can't cd to x`, `cd: no such file or directory: x`, `foo: command
# not found`. The whole line is the signature (its path blurred by error_signature).
_SHELL = re.compile(
    r"(?i)^(?:[\w./-]+: )?(?:line \d+: |\d+: )?(?:cd: .*?(?:no such file or directory|not a "
    r"directory|can't cd to)|\S+: command not found$)"
)
# A tool's banner before its message: "ERROR:", "OBSERVATION:", "<tool_use_error>", "[".
_BANNER = re.compile(r"(?i)^\s*(?:<tool_use_error>|observation:|error:|tool error:|\[|\s)*\s*")
# Words of which every message above holds one, as it is written: most results hold none,
# and are told by substring checks (a pattern of alternatives is ten times slower here).
_SIGNS = (
    "replace",
    "verbatim",
    "_str",
    "proposed edit",
    "exact match",
    "been read",
    "since read",
    "ailed to",
    "apply_patch",
    "similar match",
    "cd: ",
    "command not found",
)
_FIRST_LINES = 3
_HEAD = 600  # characters read: the message is at the top


def text_failure(text: str | None) -> str | None:
    """The failure a result's text reports in one of the well-known wordings above, named by
    its message (an edit tool's failure by the tool's own words, a shell's by its line); None
    for a result that reports none."""
    if not text:
        return None
    head = text[:_HEAD]
    for sign in _SIGNS:
        if sign in head:
            return _text_failure(head)
    return None


@lru_cache(maxsize=512)
def _text_failure(head: str) -> str | None:
    lines = [line for line in head.splitlines() if line.strip()][:_FIRST_LINES]
    for line in lines:
        body = _BANNER.sub("", line, count=1)
        found = _EDIT.match(body)
        if found is not None:
            return _NAMES[found.lastindex - 1 if found.lastindex else 0]
        if _SHELL.match(body):
            return body.strip()[:200]
    return None
