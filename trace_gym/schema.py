"""Tool schemas in the OpenAI function format: building them, validating arguments against
them (fastjsonschema), and sampling arguments that satisfy them.

The builders reproduce the exact shape tau2-bench hands its agent (pydantic's output: a
`parameters` object with `properties`, `required`, `$defs`, and list items written as
`anyOf: [{"$ref": ...}, {"type": "object", "additionalProperties": true}]`), so a tool here
is interchangeable with the target's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema

from trace_gym.errors import TraceGymError
from trace_gym.rng import Rng

Schema = dict[str, Any]


# -- builders ------------------------------------------------------------------------------


def string(description: str, enum: list[str] | None = None) -> Schema:
    """A string parameter, limited to `enum` when given."""
    s: Schema = {"description": description, "type": "string"}
    if enum is not None:
        s["enum"] = list(enum)
    return s


def integer(description: str) -> Schema:
    """An integer parameter."""
    return {"description": description, "type": "integer"}


def string_list(description: str) -> Schema:
    """A parameter that is a list of strings."""
    return {"description": description, "items": {"type": "string"}, "type": "array"}


def record_list(description: str, definition: str) -> Schema:
    """A list of records of a named definition (pydantic's `list[Model | dict]` shape)."""
    return {
        "description": description,
        "items": {
            "anyOf": [
                {"$ref": f"#/$defs/{definition}"},
                {"additionalProperties": True, "type": "object"},
            ]
        },
        "type": "array",
    }


def record(properties: Mapping[str, Schema], required: list[str] | None = None) -> Schema:
    """An object schema with these properties; all of them required unless `required` names
    which."""
    return {
        "properties": dict(properties),
        "required": list(properties) if required is None else required,
        "type": "object",
    }


def function(
    name: str,
    description: str,
    properties: Mapping[str, Schema],
    required: list[str] | None = None,
    defs: Mapping[str, Schema] | None = None,
) -> Schema:
    """An OpenAI function-tool schema. Every property is required unless `required` says."""
    parameters: Schema = {}
    if defs:
        parameters["$defs"] = dict(defs)
    parameters["properties"] = dict(properties)
    req = list(properties) if required is None else required
    if req:
        parameters["required"] = req
    parameters["type"] = "object"
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


# -- validation ----------------------------------------------------------------------------


class UnsafeSchema(TraceGymError, fastjsonschema.JsonSchemaDefinitionException):
    """A schema that would make its compiler read something outside it: a `$ref` that is not
    a pointer into the schema itself (`#/...`), or an `$id` / `id` that changes the base
    refs resolve against. A tool schema may come from a worker running generated code."""


def _refuse_fetch(uri: str) -> Any:
    raise UnsafeSchema(f"the schema refers to {uri!r}, outside itself: a tool schema may only use local "
                       f"refs ('#/$defs/Name'), and nothing is fetched")


class _NoScheme(dict):
    """fastjsonschema's `handlers`, one per URI scheme it might fetch from: every scheme,
    listed or not, is refused (a scheme without a handler would be fetched with urlopen)."""

    def __contains__(self, scheme: object) -> bool:
        return True

    def __getitem__(self, scheme: str) -> Callable[[str], Any]:
        return _refuse_fetch

    def get(self, scheme: str, default: Any = None) -> Callable[[str], Any]:
        return _refuse_fetch


_NO_FETCH = _NoScheme({scheme: _refuse_fetch for scheme in ("http", "https", "ftp", "file", "data", "")})


def check_local_refs(schema: Any, path: str = "#") -> None:
    """UnsafeSchema when `schema` holds, anywhere (fastjsonschema walks every object,
    whatever its key), a `$ref` other than a string pointer into the schema itself ("#" or
    "#/..."), or a string `$id` / `id` (a new base for the refs inside it)."""
    stack: list[tuple[Any, str]] = [(schema, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            if "$ref" in node:
                ref = node["$ref"]
                if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
                    raise UnsafeSchema(f"{where}: $ref {ref!r} is not a local ref ('#/...'); a tool schema may "
                                       f"only refer to its own definitions, and nothing is fetched")
            for key in ("$id", "id"):
                if isinstance(node.get(key), str):
                    raise UnsafeSchema(f"{where}: {key} {node[key]!r} changes the base that refs resolve against; "
                                       f"a tool schema may not set one")
            stack.extend((value, f"{where}/{key}") for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((value, f"{where}/{i}") for i, value in enumerate(node))


def compile_arguments_validator(parameters: Schema) -> Callable[[Any], Any]:
    """A validator for a tool's arguments: the schema itself, plus no unknown top-level
    argument (the target's tools are Python functions, which reject unexpected keywords).
    Raises UnsafeSchema for a schema that refers outside itself (`check_local_refs`); the
    compiler gets handlers that refuse every URI scheme, so nothing is ever fetched."""
    check_local_refs(parameters)
    strict = dict(parameters)
    strict["additionalProperties"] = False
    return fastjsonschema.compile(strict, handlers=_NO_FETCH)


def describe_validation_error(exc: fastjsonschema.JsonSchemaValueException) -> str:
    """fastjsonschema's message with `data` renamed to what the agent calls it."""
    message = str(exc.message)
    if message.startswith("data must not contain"):
        return "unexpected argument(s): " + message.removeprefix("data must not contain ")
    return message.replace("data.", "argument ", 1).replace("data ", "arguments ", 1)


def tool_call_schema(tools: list[dict[str, Any]]) -> Schema:
    """One JSON schema for the body of a tool call, `{"name": ..., "arguments": {...}}`, of
    any of `tools` (OpenAI function format): `anyOf` one object per tool, its name a
    constant, its arguments the tool's parameters with no unknown argument (as
    `compile_arguments_validator` checks them), every local `$ref` inlined (a grammar
    compiler resolves refs against the root, where each tool's own `$defs` are not; a ref
    that refers back into itself becomes "any value", which the env's validator still
    checks). Constrained decoding writes only calls that this schema accepts."""
    options = []
    for tool in tools:
        fn = tool.get("function", tool)
        parameters = fn.get("parameters") or {"type": "object", "properties": {}}
        check_local_refs(parameters)
        arguments = _inline_refs(parameters, parameters, ())
        arguments = {**arguments, "additionalProperties": False}
        options.append({"type": "object", "properties": {"name": {"const": fn["name"]}, "arguments": arguments},
                        "required": ["name", "arguments"], "additionalProperties": False})
    return {"anyOf": options}


def _inline_refs(node: Any, root: Schema, seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline_refs(v, root, seen) for v in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        if ref in seen:
            return {}
        target: Any = root
        for part in ref.removeprefix("#").strip("/").split("/") if ref != "#" else []:
            target = target.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(target, dict) else {}
        return _inline_refs(target, root, (*seen, ref))
    return {k: _inline_refs(v, root, seen) for k, v in node.items() if k not in ("$defs", "definitions")}


# -- sampling ------------------------------------------------------------------------------

_WORDS = ("alpha", "bravo", "delta", "echo", "HAT001", "2024-05-20", "SFO", "JFK", "#W1234567")


def sample_value(schema: Schema, rng: Rng, root: Schema | None = None, depth: int = 0) -> Any:
    """A random value that satisfies `schema` (the subset of JSON Schema tool schemas use)."""
    root = schema if root is None else root
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return sample_value(root["$defs"][name], rng, root, depth)
    if "anyOf" in schema:
        return sample_value(schema["anyOf"][0], rng, root, depth)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type", "object")
    if kind == "string":
        return rng.choice(_WORDS) if rng.chance(0.5) else rng.letters(rng.integer(1, 8))
    if kind == "integer":
        return rng.integer(0, 5)
    if kind == "number":
        return round(rng.random() * 100, 2)
    if kind == "boolean":
        return rng.chance(0.5)
    if kind == "array":
        n = 0 if depth > 3 else rng.integer(0, 2)
        return [sample_value(schema.get("items", {}), rng, root, depth + 1) for _ in range(n)]
    props = schema.get("properties", {})
    required = set(schema.get("required", ()))
    return {
        k: sample_value(v, rng, root, depth + 1)
        for k, v in props.items()
        if k in required or rng.chance(0.5)
    }
