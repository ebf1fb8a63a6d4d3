"""`lazy(name)`: a module bound now and loaded on its first attribute use (the standard
library's `importlib.util.LazyLoader`).

For the few heavy modules that a module needs in some of its functions only, and that the
commands run most (an idle or dry run) never use: psutil and ctypes cost a tenth of a dry run's
start-up. A module already loaded is returned as it is.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy(name: str) -> ModuleType:
    """The module `name`, executed when one of its attributes is first read."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
