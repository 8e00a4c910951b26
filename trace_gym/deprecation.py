"""Names that moved or were renamed stay importable from their old place for one release.

`moved(old, new, names)` is the old module's `__getattr__` (PEP 562): each of `names` (every
public name of `new` when none are given) is taken from the module `new` and returned with a
DeprecationWarning that names the new module. `renamed(module, {old: new})` is the
`__getattr__` of a module whose own names were renamed. Each warning is attributed to the
line that asked for the old name, so the suite's filter (DeprecationWarnings raised from
trace_gym.* are errors) fails any use of an old name left inside the package.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def moved(old: str, new: str, names: Iterable[str] | None = None) -> Callable[[str], Any]:
    """The `__getattr__` of module `old`, whose `names` (default: every public name of `new`)
    now live in module `new`: each is returned from `new` with a DeprecationWarning; any other
    name is an AttributeError."""
    known = None if names is None else frozenset(names)

    def __getattr__(name: str) -> Any:
        module = importlib.import_module(new)
        public = not name.startswith("_") and hasattr(module, name)
        if not (name in known if known is not None else public):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(f"{old}.{name} moved to {new}.{name}: import it from {new} (the old place goes in the next "
                      "release)", DeprecationWarning, stacklevel=2)
        return getattr(module, name)

    return __getattr__


def renamed(module: str, names: Mapping[str, str], home: str | None = None) -> Callable[[str], Any]:
    """The `__getattr__` of `module`, whose names `names` (old -> new) were renamed: each old
    name returns the new one's object (from `home`, default `module`) with a DeprecationWarning
    naming it; any other name is an AttributeError."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        where = home or module
        warnings.warn(f"{module}.{name} is deprecated: use {where}.{names[name]} (the old name goes in the next "
                      "release)", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(where), names[name])

    return __getattr__


__all__ = ["moved", "renamed"]
