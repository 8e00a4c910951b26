"""Names that moved to another module stay importable from their old one for one release.

`moved(old, new, names)` is the old module's `__getattr__` (PEP 562): each of `names` is
taken from the module `new` and returned with a DeprecationWarning that names the new module,
attributed to the line that imported it, so the suite's filter (DeprecationWarnings raised
from trace_gym.* are errors) fails any use of an old place left inside the package.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Iterable
from typing import Any


def moved(old: str, new: str, names: Iterable[str]) -> Callable[[str], Any]:
    """The `__getattr__` of module `old`, whose `names` now live in module `new`: each is
    returned from `new` with a DeprecationWarning; any other name is an AttributeError."""
    known = frozenset(names)

    def __getattr__(name: str) -> Any:
        if name not in known:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(f"{old}.{name} moved to {new}.{name}: import it from {new} (the old place goes in the next "
                      "release)", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)

    return __getattr__


__all__ = ["moved"]
