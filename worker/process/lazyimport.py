"""`lazy(name)`: a stand-in for the module `name`, which is imported on the first use of one
of its attributes.

For the few heavy modules that a module needs in some of its functions only, and that the
commands run most (an idle or dry run) never use: psutil and ctypes cost a tenth of a dry run's
imports. Every attribute is read from the real module (nothing is copied), so the stand-in
always agrees with it; the import itself is importlib's, safe from any thread.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _Deferred(ModuleType):
    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self.__name__), attr)


def lazy(name: str) -> ModuleType:
    """A stand-in for the module `name`, imported when one of its attributes is first read."""
    return _Deferred(name)
