"""The README's set-up commands are the ones CI runs."""

from __future__ import annotations

import re

from tests.conftest import REPO


def setup_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = re.search(r"## Set-up\n\n```bash\n(.*?)```", text, re.DOTALL)
    assert block, "README has no Set-up block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_exactly_two_setup_commands():
    commands = setup_commands()
    assert len(commands) == 2
    assert "trace-gym" in commands[0] and "pytest" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert setup_commands()[1] in ci
