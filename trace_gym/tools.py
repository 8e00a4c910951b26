"""Tools: a schema (what the agent sees), a kind (READ / WRITE / GENERIC, as tau2-bench
labels its tools) and a function over the world. A `Toolset` validates a call against the
schema and runs it; every problem becomes an "Error: ..." text for the agent."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import fastjsonschema

from trace_gym.errors import ToolError
from trace_gym.jsondata import dumps_tree
from trace_gym.schema import Schema, compile_arguments_validator, describe_validation_error


class ToolKind(str, enum.Enum):
    """What a tool does to the world, as tau2-bench labels its tools: READ looks, WRITE
    changes it, GENERIC neither (such as `calculate`)."""

    READ = "READ"
    WRITE = "WRITE"
    GENERIC = "GENERIC"


ToolFn = Callable[..., Any]


@dataclass
class Tool:
    """One tool: `fn(world, **arguments)` returns JSON-shaped data or raises ToolError."""

    schema: Schema
    kind: ToolKind
    fn: ToolFn
    _validator: Callable[[Any], Any] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        """The tool's name, from its schema."""
        return self.schema["function"]["name"]

    @property
    def parameters(self) -> Schema:
        """The JSON schema of the tool's arguments."""
        return self.schema["function"]["parameters"]

    def validate(self, arguments: Any) -> str | None:
        """None when the arguments satisfy the schema, else what is wrong."""
        if self._validator is None:  # compiling costs ~10 ms: only for tools actually called
            self._validator = compile_arguments_validator(self.parameters)
        try:
            self._validator(arguments)
        except fastjsonschema.JsonSchemaValueException as exc:
            return describe_validation_error(exc)
        return None


def render_output(value: Any) -> str:
    """A tool result as the agent reads it: strings as they are, anything else as JSON
    (json.dumps's text; tools return records and what they build from them, never a cycle)."""
    if isinstance(value, str):
        return value
    return dumps_tree(value)


class ToolResult(NamedTuple):
    """What one call gave. A named tuple: immutable, and cheap to build (one per call)."""

    content: str
    ok: bool


class Toolset(Mapping[str, Tool]):
    """An ordered, named set of tools over one kind of world."""

    def __init__(self, tools: Iterable[Tool], max_chars: int | None = None) -> None:
        self._tools = {t.name: t for t in tools}
        self.schemas: list[Schema] = [t.schema for t in self._tools.values()]
        self.max_chars = max_chars
        """The most characters one result holds (None: no bound); the rest is dropped, with a note."""

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self):
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def schema_copy(self) -> Toolset:
        """This toolset with its schemas and kinds only: every tool's call answers that it
        cannot run here (what an action space needs, in a process without the env)."""
        return Toolset((Tool(t.schema, t.kind, _schema_only) for t in self._tools.values()), self.max_chars)

    def subset(self, names: Iterable[str]) -> Toolset:
        """The named tools, in the order given (unknown names are a programmer error)."""
        return Toolset((self._tools[n] for n in names), self.max_chars)

    def names(self, kind: ToolKind | None = None) -> list[str]:
        """The names of the tools, in order; only those of `kind` when given."""
        return [n for n, t in self._tools.items() if kind is None or t.kind is kind]

    def execute(self, world: Any, name: str, arguments: Any) -> ToolResult:
        """Run one call. Unknown tools, schema violations and ToolErrors become "Error: ...";
        a result longer than `max_chars` is cut."""
        result = self._execute(world, name, arguments)
        if self.max_chars is not None and len(result.content) > self.max_chars:
            dropped = len(result.content) - self.max_chars
            return ToolResult(f"{result.content[:self.max_chars]}\n[... {dropped} characters dropped]", result.ok)
        return result

    def _execute(self, world: Any, name: str, arguments: Any) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            return ToolResult(
                f"Error: unknown tool {name!r}; available tools: {', '.join(self._tools)}",
                False,
            )
        problem = tool.validate(arguments)
        if problem is not None:
            return ToolResult(f"Error: invalid arguments for {name}: {problem}", False)
        try:
            value = tool.fn(world, **arguments)
        except ToolError as exc:
            return ToolResult(f"Error: {exc}", False)
        return ToolResult(render_output(value), True)


def _schema_only(world: Any, **arguments: Any) -> Any:
    raise ToolError("this copy of the tool holds its schema only; it runs in its env")


def tool(kind: ToolKind, schema: Schema) -> Callable[[ToolFn], Tool]:
    """Decorator: turn `fn(world, **arguments)` into a Tool with this schema and kind."""

    def wrap(fn: ToolFn) -> Tool:
        return Tool(schema=schema, kind=kind, fn=fn)

    return wrap
