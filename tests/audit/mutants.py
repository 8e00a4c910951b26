"""Mutants of template_env.py: each breaks exactly one thing the kit or the audit must catch."""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATE = Path(__file__).with_name("template_env.py")


def mutant(tmp_path: Path, name: str, **hooks: str) -> Path:
    """Write template_env.py with the lines marked `HOOK:<hook>` replaced; returns the file."""
    text = TEMPLATE.read_text()
    for hook, replacement in hooks.items():
        pattern = re.compile(rf"^(\s*).*# HOOK:{hook}\s*$", re.MULTILINE)
        assert pattern.search(text), f"no hook {hook}"
        text = pattern.sub(lambda m: "\n".join(m.group(1) + line for line in replacement.splitlines()), text)
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


# property -> hooks that break it (and, where possible, only it)
KIT_MUTANTS = {
    "gym_api": {"user": "pre.messages.append({'role': 'robot', 'content': 'beep'})"},
    "determinism": {"generate": "STATE[0] += 1\nrng = Rng.from_seed(STATE[0])"},
    # passes every static rule: a set's iteration order changes with PYTHONHASHSEED
    "determinism_across_processes": {"generate": "rng = Rng.from_seed(int(''.join(list({str(i) for i in range(40)})[:4])) + int(rng.random() * 1000))"},
    "oracle_solves": {"oracle": "call = {'name': 'cancel_pending_order', 'arguments': {'order_id': task.order_id, 'reason': 'no longer needed'}}"},
    "rewards_in_range": {"env_methods": (
        "def step(self, action):\n"
        "    obs, reward, terminated, truncated, info = super().step(action)\n"
        "    return obs, (2.0 if terminated else reward), terminated, truncated, info")},
    "verifier_soundness": {"verify": "ok = True"},
    "degenerate_policies": {"verify": "ok = final_world == expected or final_world == initial_world"},
    "malformed_actions": {"env_methods": (
        "def step(self, action):\n"
        "    if isinstance(action, str) and '{' in action:\n"
        "        raise ValueError('cannot parse that')\n"
        "    return super().step(action)")},
    "no_leak": {"task": "return Task('retail', order['order_id'], reason, pre.messages, hidden=[order['order_id']]), world"},
    "tool_schemas": {"env_methods": (
        "def __init__(self, **knobs):\n"
        "    super().__init__(**knobs)\n"
        "    from trace_gym.tools import Tool, Toolset\n"
        "    t = retail.TOOLS['cancel_pending_order']\n"
        "    params = {**t.parameters, 'required': ['order_id']}\n"
        "    schema = {'type': 'function', 'function': {**t.schema['function'], 'parameters': params}}\n"
        "    self._toolsets['retail'] = Toolset([retail.TOOLS['get_order_details'], Tool(schema, t.kind, t.fn)])")},
    "tasks_differ": {"generate": "rng = Rng.from_seed(7)"},
    "splits": {"env_generate": "return super()._new_episode(Rng.from_seed(self.np_random_seed % 1_000_000_000))"},
}


# hostile modules the audit must reject: (hooks, words the reason must contain)
HOSTILE = {
    "network_import": ({"imports": "import socket"}, "network"),
    "subprocess": ({"imports": "import subprocess"}, "runs programs"),
    "file_write": ({"generate": "open('/tmp/trace_gym_probe', 'w').write('x')"}, "file access"),
    "eval": ({"generate": "eval('1 + 1')"}, "evaluates code"),
    "global_random": ({"imports": "import random", "generate": "rng = Rng.from_seed(random.randrange(9))"}, "global random"),
    "clock": ({"imports": "import time", "generate": "rng = Rng.from_seed(int(time.time()))"}, "clock"),
    "infinite_loop": ({"generate": "while True:\n    pass"}, "CPU"),
    "memory_bomb": ({"generate": "hog = [0] * (2 ** 34)"}, "out of memory"),
    "unstable_generator": (KIT_MUTANTS["determinism"], "determinism"),
    "oracle_rejected": (KIT_MUTANTS["oracle_solves"], "oracle scored"),
    "verifier_always_one": ({"verify": "ok = True"}, "still scored 1.0"),
}
