"""A domain database: named tables of JSON records, shared copy-on-write between forks.

An episode needs three versions of one world: the initial state, the state the agent
leaves, and the state the gold actions would leave. Copying a whole world for each costs
more than the episode itself, so a fork copies only the table dicts (references to the
records) and a record is deep-copied the first time a fork writes it (`edit`). Two forks
then compare with `==` in time proportional to what changed: unchanged records are the same
objects, and dict equality short-cuts on identity.

Tools must read with `table[key]` and write only through `edit` / `insert`; a test checks
that a whole oracle episode leaves the initial world's hash unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from trace_gym.jsondata import copy_json, sha256_json

W = TypeVar("W", bound="World")

Record = dict[str, Any]


def copy_dicts(records: list[Record]) -> list[Record]:
    """A list of flat records, each copied."""
    return [r.copy() for r in records]


def copy_dict_values(table: dict[str, Record]) -> dict[str, Record]:
    """A dict of flat records, each copied."""
    return {key: r.copy() for key, r in table.items()}


def shaped_copy(fields: frozenset[str], containers: Mapping[str, Callable[[Any], Any]],
                optional: frozenset[str] = frozenset()) -> Callable[[Record], Record]:
    """A deep copy for one record shape, for `World.COPIES`: a record whose keys are
    `fields` (plus any of `optional`) is copied shallowly, then each container field
    present by its function in `containers`; any other record goes through `copy_json`.
    Most of a write's cost is the copy, and knowing the shape makes it several times
    cheaper than walking the record."""
    allowed = fields | optional

    def copy(record: Record) -> Record:
        keys = record.keys()
        if not fields <= keys <= allowed:
            return copy_json(record)
        out = record.copy()
        for name, copy_field in containers.items():
            if name in out:
                out[name] = copy_field(out[name])
        return out

    return copy


class World:
    """Tables of records keyed by id. Subclasses name their tables in `TABLES`."""

    TABLES: ClassVar[tuple[str, ...]] = ()
    COPIES: ClassVar[dict[str, Callable[[Record], Record]]] = {}
    """Table -> a deep copy for its record shape (`shaped_copy`), for `edit` (default: `copy_json`)."""

    __slots__ = ("tables", "_owned")

    def __init__(self, tables: dict[str, dict[str, Record]] | None = None) -> None:
        tables = tables or {}
        self.tables = {name: tables.get(name, {}) for name in self.TABLES}
        # Records this fork created or copied: it may mutate them in place.
        self._owned: set[tuple[str, str]] = {
            (name, key) for name, t in self.tables.items() for key in t
        }

    def fork(self: W) -> W:
        """A copy that shares every record until one side edits it."""
        new = object.__new__(type(self))
        new.tables = {name: dict(t) for name, t in self.tables.items()}
        new._owned = set()
        return new

    def freeze(self) -> None:
        """Give up ownership: later edits on this object copy first (used for the initial
        world, so nothing done through it can leak into forks already taken)."""
        self._owned = set()

    def edit(self, table: str, key: str) -> Record:
        """The record, writable: copied on the first write in this fork."""
        if (table, key) not in self._owned:
            self.tables[table][key] = self.COPIES.get(table, copy_json)(self.tables[table][key])
            self._owned.add((table, key))
        return self.tables[table][key]

    def insert(self, table: str, key: str, record: Record) -> None:
        """Add a new record that this world owns (it may mutate it in place)."""
        self.tables[table][key] = record
        self._owned.add((table, key))

    def to_json(self) -> dict[str, dict[str, Record]]:
        """The tables as JSON (a deep copy)."""
        return {name: copy_json(t) for name, t in self.tables.items()}

    @classmethod
    def from_json(cls: type[W], data: dict[str, dict[str, Record]]) -> W:
        """A world of this type from `to_json`'s output (a deep copy; missing tables are empty)."""
        return cls({name: copy_json(data.get(name, {})) for name in cls.TABLES})

    def hash(self) -> str:
        """Canonical content hash (sorted-key JSON, sha256): equal worlds, equal hashes."""
        return sha256_json(self.tables)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.tables == other.tables

    def __hash__(self) -> int:  # mutable: unhashable, like dict
        raise TypeError(f"unhashable type: {type(self).__name__}")

    def diff(self, other: World) -> list[str]:
        """'table/key' of every record that differs (for a verdict's detail)."""
        out = []
        for name in self.TABLES:
            a, b = self.tables[name], other.tables[name]
            for key in sorted(a.keys() | b.keys()):
                if a.get(key) != b.get(key):
                    out.append(f"{name}/{key}")
        return out
