"""Pure helpers the detectors share: canonical calls, error signatures, failure classes.

Everything here is a function of its arguments: no state, no I/O, cheap enough to run on
every event of a 100,000-event transcript.
"""

from __future__ import annotations

import json
import json.encoder
import re
from collections.abc import Collection, Iterable, Sequence
from functools import lru_cache
from typing import Any

# Values that differ between two otherwise identical calls: UUIDs, long hex ids (commit
# hashes, tool-use ids), ISO timestamps, and tool ids such as Claude's `toolu_01AbC...`.
_VOLATILE_VALUE = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|\b[0-9a-fA-F]{12,}\b"
    r"|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\b(?:toolu|call|item|msg)_[0-9A-Za-z]{6,}\b"
)
# Every volatile value is 10 characters or more and holds 8 hex digits in a row, 4 digits and
# a dash, or an id prefix. In ASCII text `_strip_ids` looks for the first two signs, the
# pattern `[0-9a-fA-F]{4}(?:[0-9a-fA-F]{4}|-)`, as substrings of the text with every hex digit
# written `x`, every dash kept and all else a space (bytes.translate, one C pass: five times
# cheaper than the pattern over a long text); most texts hold none. A new kind of volatile
# value needs its sign in `_strip_ids` too (a test holds the two).
_HEX_SHAPE = bytes(
    ord("x") if chr(c) in "0123456789abcdefABCDEF" else c if c == ord("-") else ord(" ")
    for c in range(256)
)
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

_SCALARS = (str, int, float, bool, type(None))
_SCALAR_TYPES = frozenset(_SCALARS)  # exactly these types: JSON's, checked without a loop
# Signatures and call arguments are memoised per distinct text (a loop or a repeated failure
# brings the same one back), texts of at most 4,000 characters: a few MB at the most.
_MEMO = 512
_MEMO_CHARS = 4000
# `json.dumps(flat, sort_keys=True, ...)` builds this encoder on every call: half its cost.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _c_canonical() -> Any:
    """JSONEncoder.encode builds its C encoder anew (with a closure) on every call, twice the
    cost of the encoding itself here; this one is built once, with the same options, and no
    circular check: it only sees flat objects of scalars. `c_make_encoder` is json's own and
    private (not in typeshed): on a Python where it is missing, takes other arguments or
    encodes differently, None, and encode() is used."""
    make = getattr(json.encoder, "c_make_encoder", None)
    try:
        # markers, default, encoder, indent, separators, sort_keys, skipkeys, allow_nan
        options = (None, _CANONICAL.default, json.encoder.encode_basestring, None, ":", ",")
        encoder = make(*options, True, False, True)  # type: ignore[misc]
        sample = {"b": "é\n", "a": 1.5, "c": None, "d": True}
        if "".join(encoder(sample, 0)) == _CANONICAL.encode(sample):
            return encoder
    except Exception:
        pass
    return None


_C_CANONICAL = _c_canonical()


def _encode(flat: dict[str, Any]) -> str:
    """`_CANONICAL.encode(flat)` for a flat object of scalars."""
    if _C_CANONICAL is None:
        return _CANONICAL.encode(flat)
    return "".join(_C_CANONICAL(flat, 0))


PERMISSION = "permission"
INFRASTRUCTURE = "infrastructure"
TOOL = "cascade"  # an ordinary tool failure; the anomaly it feeds is the "cascade" kind


def strip_volatile(value: Any, volatile_keys: Collection[str]) -> Any:
    """The arguments with volatile keys dropped and volatile values replaced by `<id>`."""
    if isinstance(value, dict):
        return {
            str(key): strip_volatile(item, volatile_keys)
            for key, item in value.items()
            if key not in volatile_keys
        }
    if isinstance(value, list):
        return [strip_volatile(item, volatile_keys) for item in value]
    if isinstance(value, str):
        return _strip_ids(value)
    return value


def _strip_ids(text: str) -> str:
    """`_VOLATILE_VALUE.sub("<id>", text)`, skipped when none of its values can be in `text`."""
    if len(text) < 10 or (
        text.isascii()  # `\d` matches other scripts' digits too
        and b"xxxxxxxx" not in (shape := text.encode("ascii").translate(_HEX_SHAPE))
        and b"xxxx-" not in shape
        and "toolu_" not in text
        and "call_" not in text
        and "item_" not in text
        and "msg_" not in text
    ):
        return text
    return _VOLATILE_VALUE.sub("<id>", text)


def canonical_args(args: dict[str, Any] | None, volatile_keys: Collection[str]) -> str:
    """Canonical JSON of a call's arguments: sorted keys, no volatile ids. The detectors call
    its two halves (canonical_strings, canonical_mixed) by themselves; this is their whole,
    which the tests hold them to."""
    if not args:
        return "{}"
    strings = canonical_strings(args, volatile_keys)
    if strings is not None:  # strings only, the common case
        return strings
    return canonical_mixed(args, volatile_keys)


def canonical_mixed(args: dict[str, Any], volatile_keys: Collection[str]) -> str:
    """`canonical_args` of arguments that canonical_strings does not take."""
    values = args.values()
    if set(map(type, values)) <= _SCALAR_TYPES or all(
        isinstance(value, _SCALARS) for value in values
    ):
        # The common flat case: one regex pass over the JSON instead of one per value.
        flat = {key: value for key, value in args.items() if key not in volatile_keys}
        return _strip_ids(_encode(flat))
    return json.dumps(
        strip_volatile(args, volatile_keys),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )


def canonical_strings(args: dict[str, Any], volatile_keys: Collection[str]) -> str | None:
    """`canonical_args` of arguments whose keys and values are all strings, at most
    4,000 characters in all (keys included); None for others. Memoised where a volatile key
    is left out (a loop that rewords its Bash `description`); the detectors keep every call
    they saw."""
    try:  # str.join takes strings only: keys and values checked, and measured, in one call
        if len("".join([*args, *args.values()])) > _MEMO_CHARS:
            return None
    except TypeError:
        return None
    if not any(map(volatile_keys.__contains__, args)):  # nothing to leave out: all in C
        return _strip_ids(_encode(args))
    return _canonical_strings(tuple([i for i in args.items() if i[0] not in volatile_keys]))


@lru_cache(maxsize=_MEMO)
def _canonical_strings(items: tuple[tuple[str, str], ...]) -> str:
    """canonical_args' flat case, for arguments whose values are all strings (equal strings
    are equal JSON; not so numbers, where 1 == 1.0 == True)."""
    return _strip_ids(_encode(dict(items)))


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


def alternation_length(keys: Sequence[str]) -> int:
    """How many trailing items alternate between exactly two different values (A B A B)."""
    n = len(keys)
    if n < 2 or keys[-1] == keys[-2]:
        return min(n, 1)
    length = 2
    while length < n and keys[n - 1 - length] == keys[n - 1 - length + 2]:
        length += 1
    return length


def distinct_failing(results: Iterable[Sequence[Any]], failure: str) -> list[str]:
    """The distinct tools whose results in `results` (tool, failure class or None, and
    anything after) failed with class `failure`, in order."""
    seen: list[str] = []
    for result in results:
        if result[1] == failure and result[0] not in seen:
            seen.append(result[0])
    return seen


def short(text: str | None, limit: int = 80) -> str:
    """One line, at most `limit` characters, safe inside backticks in a steering message."""
    if not text:
        return ""
    # Memoised for capped texts: a loop's sightings quote the same arguments again and again.
    return _short(text, limit) if len(text) <= _MEMO_CHARS else _shorten(text, limit)


def _shorten(text: str, limit: int) -> str:
    line = _squeeze(text).replace("`", "'")
    return line if len(line) <= limit else line[: limit - 1] + "…"


_short = lru_cache(maxsize=_MEMO)(_shorten)


# Claude Code's answer to the other calls of a parallel batch when one of them fails: they
# never ran, so they are not failures of their own.
SIBLING_ERRORED = "Sibling tool call errored"
# The argument that names what a call acts on (a file, a folder, a page, an element).
_TARGET_KEYS = (
    "file_path",
    "path",
    "notebook_path",
    "filePath",
    "absolute_path",
    "file",
    "filename",
    "dir",
    "directory",
    "url",
    "uri",
    "selector",
    "element",
    "target",
    "ref",
)
_NAMED = frozenset(_TARGET_KEYS)
_SHELL = ("command", "cmd", "code", "script")
_SHELL_SET = frozenset(_SHELL)
# Arguments that are the agent's prose (a message to a person, a thought): worded anew each
# time, they say nothing about where the call goes.
_PROSE = frozenset(
    {"message", "content", "text", "body", "thought", "reason", "summary", "explanation"}
    | {"note", "question", "prompt"}
)
# A call whose purpose is to wait (polling CI between checks): a cycle around it is polling.
_WAITS = re.compile(
    r"(?i)(?:^|[;&|(]\s*)(?:sleep|wait|timeout)\b|\bgh\s+(?:run|pr)\s+(?:watch|checks\s+--watch)"
)
_TRANSLATE_DIGITS = str.maketrans("0123456789", "##########")
_ASCII_DIGITS = bytes(ord("#") if 48 <= c <= 57 else c for c in range(256))


def blur_digits(text: str) -> str | bytes:
    """`text` with every digit a `#`, to compare with another so blurred (the bytes of an
    ASCII text, translated in one C pass ten times faster than str.translate's table)."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_DIGITS)
    return text.translate(_TRANSLATE_DIGITS)


def echoed_values(args: dict[str, Any] | None) -> tuple[str, ...]:
    """The call's string arguments an error may quote back (an Edit's `old_string`), longest
    first, at most 8; short ones (a flag, a number) are left in."""
    if not args:
        return ()
    values = [v for v in args.values() if isinstance(v, str) and 4 <= len(v) <= 2000]
    return tuple(sorted({_squeeze(v) for v in values}, key=len, reverse=True)[:8])


# Every key call_target and waits read.
TARGET_KEYS = _NAMED | _SHELL_SET | _PROSE


def call_target(args: dict[str, Any] | None) -> tuple[str, bool]:
    """What a call acts on, and whether its arguments hold prose: the first target-like
    argument; for a shell command, its program and the paths it names (`ls /a/b` and `ls /a`
    go to different places, two `python -c` one-liners to the same one); otherwise none (the
    other arguments are a payload: an Edit's strings, a message). Ids blurred."""
    if not args:
        return "", False
    prose = not _PROSE.isdisjoint(args)
    named = _NAMED.intersection(args)  # usually none or one: looked for in C
    for key in _TARGET_KEYS if len(named) > 1 else named:
        value = args.get(key)
        if isinstance(value, str) and value:
            return _strip_ids(value[:300]), prose
    for key in _SHELL if not _SHELL_SET.isdisjoint(args) else ():
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return _strip_ids(_shell_target(value[:2000])), prose
    return "", prose  # acts on nothing named: other arguments are its payload


@lru_cache(maxsize=_MEMO)
def _shell_target(command: str) -> str:
    words = command.split(None, 1)
    paths = _PATH.findall(command)
    return " ".join([words[0] if words else "", *paths])[:300]


def waits(args: dict[str, Any] | None) -> bool:
    """A call that waits (a shell `sleep`, `gh run watch`): what polling is made of."""
    if not args:
        return False
    for key in _SHELL:
        value = args.get(key)
        if isinstance(value, str) and _WAITS.search(value[:500]):
            return True
    return False
