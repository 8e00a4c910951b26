"""The python blocks of the README's "Use with your trainer" section, by their bold label."""

from __future__ import annotations

import re

from tests.conftest import REPO


def block(label: str) -> str:
    """The python block that follows `**LABEL` in the section (exactly one)."""
    section = (REPO / "README.md").read_text().split("## Use with your trainer", 1)[1].split("\n## ", 1)[0]
    parts = section.split(f"**{label}")
    assert len(parts) == 2, f"the section has no paragraph led by **{label}"
    found = re.search(r"```python\n(.*?)```", parts[1], flags=re.DOTALL)
    assert found, f"no python block after **{label}"
    return found.group(1)
