"""The project's modules import each other without cycles: a cycle makes the import order
matter, hides a module's real dependencies and ends in half-initialised modules."""

from __future__ import annotations

import textwrap

from tests.conftest import REPO
from tests.import_graph import cycles, import_graph, imported_modules


def test_no_module_imports_itself_through_others():
    found = cycles(import_graph(REPO))
    assert found == [], "import cycles (imports inside functions count):\n" + "\n".join(map(str, found))


def test_the_graph_sees_function_level_and_relative_imports():
    modules = {"p", "p.a", "p.b", "p.c", "p.d"}
    source = textwrap.dedent("""
        from p import a
        def later():
            from .b import thing
            import p.c
        from p import not_a_module
    """)
    import ast

    assert imported_modules(ast.parse(source), "p", modules) == {"p.a", "p.b", "p.c", "p"}


def test_a_cycle_is_found_and_named():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def sandbox_imports_of_coding(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, what it imports) for every import from the sandbox package into the coding domain."""
    def under(module: str, package: str) -> bool:
        return module == package or module.startswith(package + ".")

    return sorted((module, target) for module, targets in graph.items() if under(module, "trace_gym.sandbox")
                  for target in targets if under(target, "trace_gym.coding"))


def test_the_sandbox_package_imports_nothing_of_the_coding_domain():
    # The coding domain builds on the sandbox (the jail, the workspace), never the reverse: a
    # sandbox that imports a domain is wired across it, as the two sandboxes once were.
    found = sandbox_imports_of_coding(import_graph(REPO))
    assert found == [], "imports from trace_gym.sandbox into trace_gym.coding (inside functions too):\n" + "\n".join(
        f"{module} imports {target}" for module, target in found)


def test_an_import_of_the_coding_domain_from_the_sandbox_is_found():
    graph = {"trace_gym.sandbox.pool": {"trace_gym.sandbox.protocol"}, "trace_gym.sandbox": {"trace_gym.coding"},
             "trace_gym.coding.env": {"trace_gym.sandbox.workspace"}, "trace_gym.sandboxes": {"trace_gym.coding.x"}}
    assert sandbox_imports_of_coding(graph) == [("trace_gym.sandbox", "trace_gym.coding")]
