"""A call's arguments in canonical form, to tell two calls apart by what they do: keys sorted,
volatile keys left out, volatile values (ids, hashes, timestamps) written `<id>`.

Pure and memoised like the rest of signals.py, which re-exports these names.
"""

from __future__ import annotations

import json
import json.encoder
import re
from collections.abc import Collection
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
