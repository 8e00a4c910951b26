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
