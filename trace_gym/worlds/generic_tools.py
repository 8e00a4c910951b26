"""The generic tools both tau2 domains share: `calculate` and `transfer_to_human_agents`."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from trace_gym.errors import ToolError
from trace_gym.schema import function, string
from trace_gym.tools import Tool, ToolKind, tool

_ALLOWED_CHARS = frozenset("0123456789+-*/(). ")
_BINARY_OPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
}
_UNARY_OPS: dict[type[ast.unaryop], Callable[[float], float]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}


def evaluate_arithmetic(expression: str) -> float:
    """+, -, *, / and parentheses over numbers; anything else is a ToolError. Walks the
    syntax tree rather than evaluating code."""
    if not expression.strip() or not set(expression) <= _ALLOWED_CHARS:
        raise ToolError("Invalid characters in expression")
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ToolError("Invalid expression") from None

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and (type(node.value) is int or type(node.value) is float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Div) and right == 0:
                raise ToolError("Division by zero")
            return _BINARY_OPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY_OPS:
            return _UNARY_OPS[type(node.op)](walk(node.operand))
        raise ToolError("Invalid expression")

    try:
        return float(walk(tree))
    except (OverflowError, RecursionError):
        raise ToolError("Expression too large") from None


def calculate_tool() -> Tool:
    """The `calculate` tool: evaluates an arithmetic expression, rounded to 2 decimals."""
    @tool(ToolKind.GENERIC, function(
        "calculate",
        "Evaluate an arithmetic expression.",
        {"expression": string(
            "The expression, e.g. '(120 + 35) * 2'. Only digits, + - * /, parentheses, "
            "decimal points and spaces."
        )},
    ))
    def calculate(world: Any, expression: str) -> str:
        return str(round(evaluate_arithmetic(expression), 2))

    return calculate


TRANSFER_MESSAGE = "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON."


def transfer_tool() -> Tool:
    """The `transfer_to_human_agents` tool: always answers "Transfer successful"."""
    @tool(ToolKind.GENERIC, function(
        "transfer_to_human_agents",
        "Hand the conversation to a human agent, with a summary of the issue. Only when the "
        "user asks for a human, or when the request cannot be handled with the tools under "
        "the policy.",
        {"summary": string("Short summary of the user's issue.")},
    ))
    def transfer_to_human_agents(world: Any, summary: str) -> str:
        return "Transfer successful"

    return transfer_to_human_agents
