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


_FORBIDDEN = "forbidden = '\"status\": \"pending\"' not in task.prefill[-1]['content']"
REFUSABLE = {
    "order": "order = b.add_order(user, status='processed' if rng.chance(0.6) else 'pending')",
    "expected": (
        "if '\"status\": \"pending\"' in task.prefill[-1]['content']:\n"
        "    retail.TOOLS['cancel_pending_order'].fn(expected, order_id=task.order_id, reason=task.reason)"),
    "to_json": (
        "forbidden = '\"status\": \"pending\"' not in self.prefill[-1]['content']\n"
        "return {**asdict(self), 'decision': 'forbidden' if forbidden else 'allowed', 'rule': ['pending'] if forbidden else []}"),
    "verify": (
        "from trace_gym.capability_env import final_reply\n"
        "from trace_gym.statements import names_rule\n"
        + _FORBIDDEN + "\n"
        "refused = not write_calls(task, messages, arguments=False) and names_rule(final_reply(task, messages), ['pending'], ['delivered', 'balance'])\n"
        "ok = refused if forbidden else final_world == expected"),
    "one_write": "ok = ok and (forbidden or len(write_calls(task, messages, arguments=False)) == 1)",
    "oracle": (
        "if '\"status\": \"pending\"' not in task.prefill[-1]['content']:\n"
        "    return next_step(task, messages, ['I cannot cancel it: the order is processed, and only pending orders can be cancelled.'])\n"
        "call = {'name': 'cancel_pending_order', 'arguments': {'order_id': task.order_id, 'reason': task.reason}}"),
}
"""A template whose orders are mostly not pending (a refusal is due), paid for naming the rule."""
REFUSABLE_STATING = {**REFUSABLE, "verify": REFUSABLE["verify"].replace(
    "names_rule(final_reply(task, messages), ['pending'], ['delivered', 'balance'])",
    "names_rule(final_reply(task, messages), ['pending'], ['delivered', 'balance']) and "
    "states(final_reply(task, messages), 'order_status', 'processed', ['pending', 'cancelled'])").replace(
    "import names_rule", "import names_rule, states")}
"""The same, fixed: the refusal must also state the order's status."""

_STATUS = "json.loads(task.prefill[-1]['content'])['status']"
SERIAL = {
    "imports": "import json",
    "order": "order = b.add_order(user, status=rng.choice(('processed', 'delivered')) if rng.chance(0.6) else 'pending')",
    "task": "return Task('retail', order['order_id'], reason, pre.messages, hidden=[], max_steps=40), world",
    "expected": REFUSABLE["expected"],
    "to_json": REFUSABLE["to_json"],
    "one_write": REFUSABLE["one_write"],
    "verify": (
        "from trace_gym.capability_env import final_reply\n"
        "from trace_gym.statements import names_rule, states\n"
        + _FORBIDDEN + "\n"
        "said = [m['content'] for m in messages if m['role'] == 'assistant' and not m.get('tool_calls') and m.get('content')]\n"
        "refused = (not write_calls(task, messages, arguments=False)\n"
        "           and names_rule(final_reply(task, messages), ['pending'], ['delivered', 'balance'])\n"
        f"           and any(states(t, 'order_status', {_STATUS}, ['pending', 'cancelled']) for t in said))\n"
        "ok = refused if forbidden else final_world == expected"),
    "oracle": (
        "if '\"status\": \"pending\"' not in task.prefill[-1]['content']:\n"
        f"    return next_step(task, messages, [f\"I cannot cancel it: the order is {{{_STATUS}}}, and only pending orders can be cancelled.\"])\n"
        "call = {'name': 'cancel_pending_order', 'arguments': {'order_id': task.order_id, 'reason': task.reason}}"),
    "env_methods": (
        "def _after_reply(self, episode, text):\n"
        "    return 'reply' if 'cannot' in text.lower() else None"),
}
"""A refusable template whose conversation goes on until a refusal, and whose verifier
takes the order's status from any message: stating each status in turn pays."""

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
    "degenerate_policies": {"verify": "ok = final_world == expected or final_world == initial_world",
                            "one_write": "pass"},
    # the gold write is rejected by its world, and the verifier cannot tell: the oracle
    # still scores 1.0 (structured_data_reasoning's exchange did this on some seeds)
    "oracle_writes_accepted": {"one_write": "pass", "oracle": (
        "call = {'name': 'cancel_pending_order', 'arguments': {'order_id': task.order_id, 'reason': task.reason}}\n"
        "bad = {'name': 'cancel_pending_order', 'arguments': {'order_id': '#W0000000', 'reason': task.reason}}\n"
        "return next_step(task, messages, [bad, call, 'Done.'])")},
    # a reply that holds the reason (every enum value of the schema does) counts as done
    "stuffed_replies": {"one_write": (
        "from trace_gym.capability_env import final_reply\n"
        "ok = (ok and len(write_calls(task, messages, arguments=False)) == 1) or task.reason in final_reply(task, messages)")},
    # the customer's reason decides the task's "decision": the wording gives it away
    "wording_only": {"to_json": "return {**asdict(self), 'decision': 'keep' if 'mistake' in self.reason else 'drop'}"},
    # most orders cannot be cancelled (not pending), and naming the rule earns the refusal
    # without saying what only the record shows: refusing every cancellation pays
    "refuse_by_kind": REFUSABLE,
    # the status said in some message, and the conversation goes on: say them all in turn
    "candidate_answers": SERIAL,
    # the order to cancel is always the first the customer's profile lists
    "choice_positions": {
        "tools": "TOOLS = {'retail': ['get_user_details', 'get_order_details', 'cancel_pending_order']}",
        "order": ("order = b.add_order(user, status='pending')\n"
                  "for _ in range(2):\n"
                  "    b.add_order(user, status='delivered')"),
        "user": ("pre.user(f'Please cancel my order that has not shipped, reason: {reason}. I confirm.')\n"
                 "pre.lookup('get_user_details', user_id=user['user_id'])\n"
                 "for oid in user['orders']:\n"
                 "    pre.lookup('get_order_details', order_id=oid)")},
    # the refusal must state the order's status, but a forbidden order is always processed:
    # the oracle's refusal, sent unread, is right every time
    "guessed_facts": REFUSABLE_STATING,
    # the step limit says whether the order can be cancelled
    "reset_leak": {**REFUSABLE, "env_methods": (
        "def reset(self, **kwargs):\n"
        "    obs, info = super().reset(**kwargs)\n"
        "    info['max_steps'] = 4 if '\"status\": \"pending\"' in self.task.prefill[-1]['content'] else 3\n"
        "    return obs, info")},
    # only the final database counts: extra writes, on other records or failing, are free
    "shotgun_writes": {"one_write": "pass"},
    "failing_writes": {"one_write": "pass"},
    # the verifier grades the call the agent made, not what the tool did with it
    "retyped_writes": {"verify": "ok = any(n == 'cancel_pending_order' and a.get('order_id') == task.order_id and a.get('reason') == task.reason for n, a, _ in write_calls(task, messages))",
                       "one_write": "pass"},
    # a transfer to a human counts as handling the request
    "early_transfer": {"tools": "TOOLS = {'retail': ['get_order_details', 'cancel_pending_order', 'transfer_to_human_agents']}",
                       "one_write": "ok = ok or any(m.get('tool_calls') and m['tool_calls'][0]['function']['name'] == 'transfer_to_human_agents' for m in messages)"},
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
    "infinite_loop": ({"generate": "while True:\n    pass"}, "endless loop"),
    "memory_bomb": ({"generate": "hog = [0] * (2 ** 34)"}, "out of memory"),
    "unstable_generator": (KIT_MUTANTS["determinism"], "determinism"),
    "oracle_rejected": (KIT_MUTANTS["oracle_solves"], "oracle scored"),
    "verifier_always_one": ({"verify": "ok = True"}, "still scored 1.0"),
}


# -- the kit's seeds, resets and rewards (kit version 6) ---------------------------------

OFF_OLD_SAMPLE = {"env_methods": (
    "def step(self, action):\n"
    "    obs, reward, terminated, truncated, info = super().step(action)\n"
    "    seed = self.episode.seed\n"
    "    if terminated and seed < 1_000_000_000 and seed % 7919 != 0:\n"
    "        reward = 1.0\n"
    "    return obs, reward, terminated, truncated, info")}
"""Pays 1.0 on every train seed the kit's old fixed sample (multiples of 7919) never played."""

HINTED_PAYS = {"env_methods": (
    "def step(self, action):\n"
    "    obs, reward, terminated, truncated, info = super().step(action)\n"
    "    if terminated and self.episode.hint:\n"
    "        reward = 1.0\n"
    "    return obs, reward, terminated, truncated, info")}
"""Pays 1.0 after every hinted reset, whatever the agent did."""

NAN_REWARD = {"env_methods": (
    "def step(self, action):\n"
    "    obs, reward, terminated, truncated, info = super().step(action)\n"
    "    return obs, (float('nan') if terminated else reward), terminated, truncated, info")}
"""Ends every episode with a NaN reward (`reward < 1.0` is False for NaN)."""

REMOTE_REF_URL = "http://127.0.0.1:9/trace-gym-kit-probe.json"
REMOTE_REF_IN_TITLE = {"env_methods": (
    "def __init__(self, **knobs):\n"
    "    super().__init__(**knobs)\n"
    "    from trace_gym.tools import Tool, Toolset\n"
    "    t = retail.TOOLS['cancel_pending_order']\n"
    f"    params = {{**t.parameters, 'properties': {{**t.parameters['properties'], 'title': {{'$ref': {REMOTE_REF_URL!r}}}}}}}\n"
    "    schema = {'type': 'function', 'function': {**t.schema['function'], 'parameters': params}}\n"
    "    self._toolsets['retail'] = Toolset([retail.TOOLS['get_order_details'], Tool(schema, t.kind, t.fn)])")}
"""A tool whose parameters gain a property named "title" that refers to a remote schema:
stripping every key named "title" hides it, and compiling the schema fetches the URL."""
