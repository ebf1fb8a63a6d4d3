"""File names that every file system accepts: Linux, macOS (APFS) and Windows (NTFS, FAT).

Names worker makes from ids it does not choose (task ids such as `owner/name#12`, inbox message
ids) go through `portable_name`. Windows refuses `<>:"/\\|?*` and control characters, names
ending in a dot or a space, and the device names CON, PRN, AUX, NUL, COM1-9 and LPT1-9 with any
extension ("Naming Files, Paths, and Namespaces", Microsoft Learn). Paths themselves (the
workspace, the inbox on `G:\\Mon Drive\\…`) are never rewritten: spaces and non-ASCII letters in
folders are fine everywhere; only the names worker invents are kept to a safe alphabet.
"""

from __future__ import annotations

import hashlib
import re

_RESERVED = frozenset(
    ["CON", "PRN", "AUX", "NUL"]
    + [f"COM{n}" for n in range(1, 10)]
    + [f"LPT{n}" for n in range(1, 10)]
)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# Well under Windows' 260-character MAX_PATH once a deep synced folder is in front of it.
_MAX_STEM = 100


def portable_name(text: str, default: str = "task") -> str:
    """A file name (without extension) for `text`: `text` itself when it is already safe,
    otherwise a cleaned form plus a short hash of `text`, so that `a/b` and `a_b` stay apart."""
    safe = _UNSAFE.sub("_", text).strip("._ ") or default
    if safe != text or reserved(safe) or len(safe) > _MAX_STEM:
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        safe = f"{safe[:_MAX_STEM].rstrip('._ ')}-{digest}"
        if reserved(safe):  # `aux.json-1a2b3c4d` is still the device AUX
            safe = "_" + safe
    return safe


def reserved(name: str) -> bool:
    """Windows gives the name to a device: `CON`, `con.json`, `Lpt1.log`."""
    return name.split(".", 1)[0].rstrip(" ").upper() in _RESERVED


def valid_on_windows(name: str) -> bool:
    """`name` is a file name Windows accepts (used by tests and checks)."""
    return (
        bool(name)
        and not re.search(r'[<>:"/\\|?*\x00-\x1f]', name)
        and not name.endswith((".", " "))
        and not reserved(name)
    )
