"""What makes two texts "the same": an error's own words and their signature, a CLI error's,
an answer's and a message's signatures, and the class of a failure (permission,
infrastructure, an ordinary tool failure).

Pure and memoised like the rest of signals.py, which re-exports these names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from worker.supervision.canonical import _MEMO, _strip_ids

_DIGITS = re.compile(r"\d+")
# `\b\d+...`, written to start with the digit (the look-behind is the `\b`): a pattern that starts
# with a character class is searched in C from one candidate to the next. A test holds the two.
_DURATION = re.compile(r"\d(?<!\w\d)\d*(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds?|m|min|minutes?|h)\b")
# Paths differ between two attempts at the same failing thing (a temp file, another file of
# the same kind): `/tmp/x/a.py`, `./src/b.ts`, `C:\\work\\c.txt`.
_PATH = re.compile(r"(?<![\w.@~+-])(?:[A-Za-z]:)?[\w.@~+-]*[/\\][\w.@~/\\+-]*")
_TAG = re.compile(r"</?tool_use_error>")
# The wrappers a harness puts around an error, which are not the error: mini-swe-agent's
# `<returncode>N</returncode>` and `<output>` tags, Claude Code's `<tool_use_error>`, and
# the like. Two failing commands with the same wrapper are not the same error.
_WRAPPER_TAG = re.compile(
    r"<returncode>\s*-?\d+\s*</returncode>|</?(?:tool_use_error|output|output_head|output_tail"
    r"|stdout|stderr|error|exception|exception_info|warning|elided_chars)>"
)
# A first line that names no error by itself: an exit-code banner (Claude Code's Bash
# "Exit code N", "Command exited with code N", OpenHands' "[Command finished with exit code N]")
# and Python's "Traceback (most recent call last):" put the error on the last line.
_OPENER = re.compile(
    r"(?i)^\s*\[?(?:exit code:? -?\d+|(?:command |process )?(?:exited|finished|failed)"
    r"(?: with)?(?: exit)? (?:code|status):? -?\d+\]?\.?|traceback \(most recent call last\):)\s*$"
)
# A tool's banner before the error's own words: "Error: ", "Tool execution failed: ".
_BANNER = re.compile(
    r"(?i)^\s*(?:error|tool error|tool execution (?:error|failed)|execution error"
    r"|command failed|failed)\s*[:-]\s+"
)
# Python's site.py prints this before every start in an environment with a broken .pth file
# (seen in SWE-bench images): it is the environment's noise, not the command's result.
_PTH_WARNING = re.compile(
    r"^\s*Error processing line \d+ of [^\n]*\.pth:\n.*?Remainder of file ignored\n",
    re.DOTALL,
)
_SPACE = re.compile(r"\s+")

# How Claude Code, Codex and Gemini CLI word a refused tool (denied by the user or by the
# permission settings); Cline and Roo Code leave these out of the cascade count.
_PERMISSION = re.compile(
    r"(?i)(requested permissions? to use|haven't granted|permission to use \S+ (?:was|has "
    r"been) denied|user (?:doesn't|does not) want to proceed|user denied|rejected by (?:the )?"
    r"user|denied by (?:the )?(?:user|policy|permission)|not allowed by|tool execution denied"
    r"|approval (?:was )?(?:denied|declined|required)|declined by the user)"
)
# The environment failing rather than the agent's action: network, API, quota, disk.
_INFRASTRUCTURE = re.compile(
    r"(?i)(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EAI_AGAIN|connection (?:refused|reset|timed out)"
    r"|network is unreachable|could not resolve host|temporary failure in name resolution"
    r"|name or service not known|\b(?:429|500|502|503|504)\b|too many requests|rate.?limit"
    r"|overloaded|service unavailable|bad gateway|gateway time-?out|internal server error"
    r"|no space left on device|mcp error|server disconnected|ssl(?:error)?:|certificate verify "
    r"failed)"
)


PERMISSION = "permission"
INFRASTRUCTURE = "infrastructure"
TOOL = "cascade"  # an ordinary tool failure; the anomaly it feeds is the "cascade" kind


def error_head(text: str | None) -> str:
    """The line that names an error: the first one, tags such as <tool_use_error> removed.

    Later lines quote the arguments, which change between attempts at the same failing
    thing. Claude Code's Bash errors open with a bare "Exit code N", so there the last line
    (where the error usually is) is kept too.
    """
    return _error_head(text[:4000]) if text else ""


@lru_cache(maxsize=_MEMO)
def _error_head(text: str) -> str:
    body = _PTH_WARNING.sub("", _WRAPPER_TAG.sub("\n", text), count=1)
    lines = [line for line in body[:2000].splitlines() if line.strip()]
    if not lines:
        return ""
    opened = False  # an exit-code banner or a traceback's opener: the error is last
    while lines and _OPENER.match(lines[0]):
        opened = True
        if len(lines) == 1:
            return lines[0].strip()[:300]  # the banner alone: no words of the error's own
        lines.pop(0)
    head = (lines[-1] if opened else lines[0]).strip()
    return _BANNER.sub("", head, count=1)[:300] or head[:300]


def error_signature(text: str | None, echoed: Sequence[str] = ()) -> str:
    """What makes two errors "the same": their own text (a harness's wrapper, an exit-code
    banner, a tool's "Error:" and the call's own arguments quoted back, `echoed`, left out),
    ids, paths, numbers and times blurred. Empty when the error has no words of its own (only
    a wrapper or a bare exit code): the caller then tells two such errors apart by their
    calls. Two linter runs on different inputs differ in what they report, though both
    open with the same header."""
    own = error_text(text)
    for value in echoed:
        if value in own:
            own = own.replace(value, "<arg>")
    return _blurred(own) if own else ""


def error_text(text: str | None) -> str:
    """An error's own text: wrappers, banners, exit-code lines and environment noise left
    out, whitespace squeezed, at most 1,000 characters."""
    return _error_text(text[:4000]) if text else ""


@lru_cache(maxsize=_MEMO)
def _error_text(text: str) -> str:
    body = _PTH_WARNING.sub("", _WRAPPER_TAG.sub("\n", text), count=1)
    lines = [line for line in body[:3000].splitlines() if line.strip()]
    while lines and _OPENER.match(lines[0]):
        lines.pop(0)
    if lines:
        lines[0] = _BANNER.sub("", lines[0], count=1)
    return _squeeze(" ".join(lines))[:1000]


def result_signature(text: str | None, limit: int = 2000) -> str:
    """What makes two CLI errors "the same": the whole text (its first `limit` characters),
    with ids, paths, numbers and timestamps blurred."""
    return _blurred(_TAG.sub("", (text or "")[:limit]))


def answer_signature(text: str | None, limit: int = 2000) -> str:
    """What makes two answers to the same call "the same": ids, timestamps and durations
    blurred (`in 1.23s` on every test run), other numbers kept, since `3 failed` -> `2 failed`
    or `step 1/4` -> `step 2/4` is news."""
    return _answer((text or "")[:limit])


@lru_cache(maxsize=_MEMO)
def _answer(text: str) -> str:
    return _squeeze(_DURATION.sub("<t>", _strip_ids(text)))


def _squeeze(text: str) -> str:
    """`_SPACE.sub(" ", text).strip()` in C: the pattern, split() and strip() all take
    whitespace to be what str.isspace() says."""
    return " ".join(text.split())


def _blur(text: str) -> str:
    text = _PATH.sub("<path>", _strip_ids(text))
    return _SPACE.sub(" ", _DIGITS.sub("#", text)).strip()


_blurred = lru_cache(maxsize=_MEMO)(_blur)  # for capped texts: error heads, CLI errors


def failure_class(text: str | None) -> str:
    """`permission`, `infrastructure`, or `cascade` (an ordinary tool failure)."""
    return _failure_class(text[:1000]) if text else TOOL


@lru_cache(maxsize=_MEMO)
def _failure_class(head: str) -> str:
    if _PERMISSION.search(head):
        return PERMISSION
    if _INFRASTRUCTURE.search(head):
        return INFRASTRUCTURE
    return TOOL


def message_signature(text: str | None, min_chars: int) -> str | None:
    """Whitespace-normalised assistant text, or None when too short to call a repetition."""
    if not text:
        return None
    norm = _squeeze(text)
    return norm if len(norm) >= min_chars else None
