"""Command-line flags built from a config dataclass, so that a field is declared once.

A flag's name is the field's (`group_size` -> `--group-size`), its type is the field's
annotation and its help text is the field's docstring (the string literal under the field,
the convention of every config in the package), followed by the default. A flag left out
is absent from the parsed namespace, so the config's own default (or a config file's
table) applies. Values are not checked here: the dataclass validates every field at
construction, one place, and its `InvalidConfig` names the field and the rule.

    >>> import argparse, dataclasses
    >>> @dataclasses.dataclass
    ... class Demo:
    ...     group_size: int = 16
    ...     tags: tuple[str, ...] = ()
    >>> parser = argparse.ArgumentParser()
    >>> add_config_flags(parser, Demo)
    >>> config_values(parser.parse_args(["--group-size", "4", "--tags", "a,b"]), Demo)
    {'group_size': 4, 'tags': ('a', 'b')}
    >>> config_values(parser.parse_args([]), Demo)
    {}
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import textwrap
import types
import typing
from collections.abc import Callable, Collection, Mapping
from typing import Any

__all__ = ["add_config_flags", "config_values", "field_docs", "flag_name"]


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Field name -> the docstring written under it in the class body (inherited ones
    included), whitespace collapsed. A field without one maps to ''."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):  # defined where no source is kept (a REPL): no help text
            continue
        body = tree.body[0].body  # type: ignore[attr-defined]
        for node, after in zip(body, [*body[1:], None]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
                docs[node.target.id] = " ".join(after.value.value.split())
    return {f.name: docs.get(f.name, "") for f in dataclasses.fields(cls)}


def flag_name(field_name: str) -> str:
    """`--group-size` for `group_size`."""
    return "--" + field_name.replace("_", "-")


def _parse_bool_or_str(text: str) -> bool | str:
    lowered = text.lower()
    return {"true": True, "false": False}.get(lowered, text)


def _comma_list(item: Callable[[str], Any]) -> Callable[[str], tuple[Any, ...]]:
    def parse(text: str) -> tuple[Any, ...]:
        return tuple(item(part.strip()) for part in text.split(",") if part.strip())

    parse.__name__ = f"comma-separated {getattr(item, '__name__', 'value')}s"  # argparse names it in an error
    return parse


def _members(hint: Any) -> tuple[Any, ...]:
    """The types of a union (`float | None` -> (float,)), None left out; else (hint,)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(a for a in typing.get_args(hint) if a is not type(None))
    return (hint,)


def _parser_for(hint: Any) -> tuple[Callable[[str], Any] | None, str]:
    """How to read a flag of this type from text, and the metavar; None for a type no
    flag can carry (a dict, a nested config): those come from a config file."""
    members = _members(hint)
    if members == (bool,):
        return bool, ""  # a --flag / --no-flag pair
    if set(members) == {bool, str}:
        return _parse_bool_or_str, "{true,false,auto}"
    if len(members) != 1:
        return None, ""
    (kind,) = members
    if kind in (int, float, str):
        return kind, kind.__name__.upper()
    if typing.get_origin(kind) is tuple:
        args = [a for a in typing.get_args(kind) if a is not Ellipsis]
        if args and all(a in (int, float, str) for a in args) and len(set(args)) == 1:
            return _comma_list(args[0]), "A,B,..."
    return None, ""


def _flag_fields(cls: type, only: Collection[str] | None, skip: Collection[str]) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls)
            if (only is None or f.name in only) and f.name not in skip and f.init]


def add_config_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type, *,
                     only: Collection[str] | None = None, skip: Collection[str] = (),
                     flags: Mapping[str, str] | None = None, defaults: Mapping[str, Any] | None = None,
                     prefix: str = "") -> None:
    """Add a flag for each field of the dataclass `cls` that a flag can carry (numbers,
    strings, booleans, tuples of one of these), `only` those named or all but `skip`.
    `flags` renames a field's flag (`{"source": "--from"}`); `defaults` names the default
    the help text shows where the command's differs from the dataclass's; `prefix` puts a
    word before every flag (`--rollout-episodes`), for several dataclasses on one command."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    for f in _flag_fields(cls, only, skip):
        parse, metavar = _parser_for(hints[f.name])
        if parse is None:
            continue
        if defaults and f.name in defaults:
            default = defaults[f.name]
        elif f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else "none" if default is None else default
        text = f"{docs[f.name]} (default: {shown})".lstrip().replace("%", "%%")
        name = (flags or {}).get(f.name, flag_name(f"{prefix}_{f.name}" if prefix else f.name))
        dest = _dest(f.name, prefix)
        if parse is bool:
            parser.add_argument(name, dest=dest, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS,
                                help=text)
        else:
            parser.add_argument(name, dest=dest, type=parse, metavar=metavar, default=argparse.SUPPRESS, help=text)


def _dest(field_name: str, prefix: str) -> str:
    """Where a field's flag lands in the namespace (prefixed ones apart from unprefixed)."""
    return f"{prefix}__{field_name}" if prefix else field_name


def config_values(args: argparse.Namespace, cls: type, *, only: Collection[str] | None = None,
                  skip: Collection[str] = (), prefix: str = "") -> dict[str, Any]:
    """The fields of `cls` that the command line set (a flag left out is absent)."""
    given = vars(args)
    return {f.name: given[_dest(f.name, prefix)] for f in _flag_fields(cls, only, skip)
            if _dest(f.name, prefix) in given}
