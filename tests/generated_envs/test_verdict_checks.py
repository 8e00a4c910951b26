"""Each capability env's checks say exactly what its docstring says they pay, recomputed here
from the conversation itself: the oracle, doing nothing and the kit's adversaries (rejected
writes, shotgun writes, retyped arguments, a renamed write), and a rejected write beside a
stray accepted one. Conversations are also verified read back from JSON, as stored
trajectories are."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from trace_gym.testing import adversaries
from trace_gym.testing.adversaries import _message, play_oracle
from trace_gym.tools import ToolKind

ENVS = ("trace/precondition_verification-v0", "trace/multi_step_task_completion-v0",
        "trace/structured_data_reasoning-v0", "trace/tool_calling_precision-v0")
SEEDS = range(30)


def _writes(env):
    """(name, arguments text, accepted) of the agent's write calls, from its own turns."""
    ep = env.episode
    own = ep.messages[1 + len(ep.task.prefill):]
    results = {m["tool_call_id"]: m["content"] for m in own if m["role"] == "tool"}
    kinds = {n: t.kind for n, t in ep.toolset.items()}
    return [(tc["function"]["name"], tc["function"]["arguments"], not results[tc["id"]].startswith("Error"))
            for m in own if m["role"] == "assistant" for tc in m.get("tool_calls") or []
            if kinds.get(tc["function"]["name"]) is ToolKind.WRITE]


def _renamed_write(env, seed):
    """The oracle, its write sent under another write tool's name (when the env offers one)."""
    def change(e, reply, calls):
        others = [n for n, t in e.episode.toolset.items() if t.kind is ToolKind.WRITE]
        if not calls or len(others) < 2:
            return None
        return _message([{**c, "name": next(o for o in others if o != c["name"])} for c in calls])
    return play_oracle(env, seed, change=change)[0]


def _rejected_and_stray(env, seed):
    """A rejected write and the oracle's first write sent before the oracle plays (which then
    makes that write again): one rejected, and one more accepted than operations done, when
    the repeat goes through."""
    env.reset(seed=seed)
    first = None
    obs = env.episode.messages
    while first is None and not env.episode.over:
        action = env.oracle_action(obs)
        _, calls = adversaries._calls_of(action)
        first = next((c for c in calls if env.episode.toolset[c["name"]].kind is ToolKind.WRITE), None)
        obs, *_ = env.step(action)
    if first is None:
        return None
    rejected = {"name": first["name"], "arguments": {"_": None}}
    return play_oracle(env, seed, before=_message([rejected, first]))[0]


def _episodes(env, seed):
    for play in (env.oracle_action, lambda m: "I cannot help with that."):
        env.reset(seed=seed)
        while not env.episode.over:
            env.step(play(env.episode.messages))
        yield "oracle" if play == env.oracle_action else "nothing"
    for name in ("failing_writes", "shotgun_writes", "retyped_bools", "retyped_strings", "extra_argument"):
        if adversaries.ADVERSARIES[name](env, seed) is not None:
            yield name
    for name, adversary in (("renamed", _renamed_write), ("rejected_and_stray", _rejected_and_stray)):
        if adversary(env, seed) is not None:
            yield name


def _expected(env, checks, writes):
    """What each check must credit, by the env's docstring, from the conversation."""
    task = env.episode.task
    rejected = sum(not ok for *_, ok in writes)
    env_id = env.spec.id if env.spec else type(env).__name__
    out = {}
    if "precondition" in env_id:
        if task.forbidden:
            out["no_mutating_call"] = (not writes, 0.5 if not writes else 0.0)
            refusal = checks["refusal"]
            assert not (refusal.passed and writes)
            out["refusal"] = (refusal.passed, 0.5 if refusal.passed else 0.0)
        else:
            out["database"] = (checks["database"].passed, 1.0 if checks["database"].passed else 0.0)
            out["rejected_writes"] = (rejected == 0, -0.1 * rejected)
    elif "multi_step" in env_id:
        ops = [n for n in checks if n.startswith("operation[")]
        done = sum(checks[n].passed for n in ops)
        for n in ops:
            out[n] = (checks[n].passed, 0.6 / len(ops) if checks[n].passed else 0.0)
        out["all_operations"] = (done == len(ops), 0.4 if done == len(ops) else 0.0)
        stray = max(0, len(writes) - rejected - done)
        wrong = rejected + stray
        out["wrong_writes"] = (wrong == 0, -0.1 * wrong)
        if wrong:  # the detail tells rejected writes from stray ones
            assert checks["wrong_writes"].detail == (f"{rejected} write(s) rejected by the tool, {stray} more went "
                                                     f"through than operations were done")
    else:
        first = "write_call" if "structured" in env_id else "name"
        gold = task.gold["name"]
        ok = len(writes) == 1 and writes[0][2] and writes[0][0] == gold
        out[first] = (ok, 0.0)
        detail = checks[first].detail
        if len(writes) != 1:
            assert detail == f"{len(writes)} write calls; the task takes exactly one"
        elif not writes[0][2]:
            assert detail == f"the tool rejected the {writes[0][0]} call"
        elif not ok:
            assert detail == f"called {writes[0][0]}, expected {gold}"
        if not ok:
            assert list(checks) == [first]
        else:
            arguments = json.loads(writes[0][1])
            groups = task.credits if "structured" in env_id else {a: 1.0 / len(task.gold["arguments"])
                                                                   for a in task.gold["arguments"]}
            for group, credit in groups.items():
                right = all(a in arguments and json.dumps(arguments[a]) == json.dumps(task.gold["arguments"][a])
                            for a in group.split("+"))
                out[group] = (right, credit if right else 0.0)
    return out


@pytest.mark.parametrize("env_id", ENVS)
def test_every_check_pays_what_its_docstring_says(env_id):
    env = gym.make(env_id).unwrapped
    env.spec = gym.spec(env_id)
    seen = set()
    for seed in SEEDS:
        for name in _episodes(env, seed):
            ep = env.episode
            verdict = env.verify(ep.task, ep.initial_world, ep.world, ep.messages)
            assert verdict == ep.verdict
            assert verdict == env.verify(ep.task, ep.initial_world, ep.world, json.loads(json.dumps(ep.messages)))
            checks = {c.name: c for c in verdict.checks}
            expected = _expected(env, checks, _writes(env))
            assert set(expected) == set(checks), (seed, name, checks)
            for check, (passed, credit) in expected.items():
                got = checks[check]
                assert (got.passed, got.credit) == (passed, pytest.approx(credit)), (seed, name, got)
                seen.add((check.split("[")[0], passed))
            assert verdict.score == pytest.approx(min(1.0, max(0.0, sum(c.credit for c in verdict.checks))))
    # the env's fixed checks were each seen passing and failing
    core = {"trace/precondition_verification-v0": ("database", "rejected_writes", "no_mutating_call", "refusal"),
            "trace/multi_step_task_completion-v0": ("operation", "all_operations", "wrong_writes"),
            "trace/structured_data_reasoning-v0": ("write_call",),
            "trace/tool_calling_precision-v0": ("name",)}[env_id]
    assert all((n, True) in seen and (n, False) in seen for n in core), seen


def test_a_rejected_write_beside_a_stray_one_costs_two_tenths():
    env = gym.make("trace/multi_step_task_completion-v0").unwrapped
    found = 0
    for seed in SEEDS:
        if _rejected_and_stray(env, seed) is None:
            continue
        writes = _writes(env)
        wrong = next(c for c in env.episode.verdict.checks if c.name == "wrong_writes")
        done = sum(c.passed for c in env.episode.verdict.checks if c.name.startswith("operation["))
        if sum(not ok for *_, ok in writes) == 1 and sum(ok for *_, ok in writes) == done + 1:
            assert wrong.credit == pytest.approx(-0.2) and not wrong.passed
            found += 1
    assert found >= 3


def _replace_write(env, seed, make):
    """The oracle, its write call replaced by `make(env, call)` (None: keep it); the episode
    is left in `env`."""
    def change(e, reply, calls):
        if calls and e.episode.toolset[calls[0]["name"]].kind is ToolKind.WRITE:
            new = make(e, calls[0])
            return None if new is None else _message([new])
        return None
    return play_oracle(env, seed, change=change)[1]


def _other_values(env, value):
    """Values of the conversation of the same JSON type as `value`, other than it."""
    seen = adversaries.leaves(env.episode.messages)
    return [v for _, v in seen if type(v) is type(value) and v != value]


@pytest.mark.parametrize("env_id", ["trace/structured_data_reasoning-v0", "trace/tool_calling_precision-v0"])
def test_an_accepted_call_pays_only_for_its_right_name_and_arguments(env_id):
    from trace_gym.rng import Rng

    env = gym.make(env_id).unwrapped
    env.spec = gym.spec(env_id)
    wrong_names, wrong_groups = set(), 0
    for seed in range(150):
        rng = Rng.from_seed(seed)

        def rename(e, call):
            others = [t for n, t in e.episode.toolset.items() if t.kind is ToolKind.WRITE and n != call["name"]]
            if not others:
                return None
            tool = others[seed % len(others)]
            target = next((v for v in call["arguments"].values() if isinstance(v, str)), "")
            seen = adversaries.seen_by_key(e.episode.messages)
            return {"name": tool.name, "arguments": adversaries.fill_arguments(tool, target, seen, rng)}

        def change_one(e, call):
            keys = sorted(call["arguments"])
            key = keys[seed % len(keys)]
            others = _other_values(e, call["arguments"][key])
            return {**call, "arguments": {**call["arguments"], key: others[0]}} if others else None

        for make in (rename, change_one):
            if not _replace_write(env, seed, make):
                continue
            writes = _writes(env)
            checks = {c.name: c for c in env.episode.verdict.checks}
            _expected(env, checks, writes)  # asserts the detail of a failed call
            if len(writes) == 1 and writes[0][2]:
                if make is rename:
                    assert env.episode.verdict.score == 0.0 and list(checks) == [next(iter(checks))]
                    wrong_names.add(writes[0][0] < env.episode.task.gold["name"])
                elif any(not c.passed for c in checks.values()):
                    wrong_groups += 1
                    for c in checks.values():
                        assert c.credit == (0.0 if not c.passed else c.credit) and c.credit >= 0.0
                    expected = _expected(env, checks, writes)
                    assert {n: (c.passed, pytest.approx(c.credit)) for n, c in checks.items()} == expected
                    assert env.episode.verdict.score < 1.0
    assert wrong_groups >= 3, wrong_groups
    if env_id == "trace/structured_data_reasoning-v0":
        assert wrong_names == {True, False}, wrong_names  # accepted wrong tools named before and after the gold's


def test_a_refusals_detail_says_which_other_values_are_allowed():
    env = gym.make("trace/precondition_verification-v0", forbidden_rate=1.0).unwrapped
    kinds = set()
    for seed in SEEDS:
        env.reset(seed=seed)
        env.step("I cannot help with that.")
        fact = env.episode.task.fact
        refusal = next(c for c in env.episode.verdict.checks if c.name == "refusal")
        assert f"(no other but {fact['also'] or 'none'})" in refusal.detail
        kinds.add(bool(fact["also"]))
    assert kinds == {True, False}


@pytest.mark.parametrize("env_id", ("trace/structured_data_reasoning-v0", "trace/tool_calling_precision-v0"))
def test_an_accepted_write_under_another_name_earns_nothing_whichever_way_the_names_sort(env_id):
    """The one write these envs grade must be the gold tool's: the oracle's conversation with
    its write renamed to each other write tool, the tool's result kept as accepted, is
    verified by the env's own verifier and scores 0, for names sorting before and after."""
    env = gym.make(env_id).unwrapped
    before = after = 0
    for seed in SEEDS:
        play_oracle(env, seed)
        ep = env.episode
        writes = {n for n, t in ep.toolset.items() if t.kind is ToolKind.WRITE}
        gold = ep.task.gold["name"]
        for other in sorted(writes - {gold}):
            messages = json.loads(json.dumps(ep.messages))
            for m in messages:
                for tc in m.get("tool_calls") or []:
                    if tc["function"]["name"] == gold:
                        tc["function"]["name"] = other
            verdict = env.verify(ep.task, ep.initial_world, ep.world, messages)
            assert verdict.score == 0.0, (seed, gold, other, verdict)
            before, after = before + (other < gold), after + (other > gold)
    assert before and after


def test_every_multi_step_operation_changes_its_record():
    """The invariant that makes multi-step's stray count exact: an operation is done only
    through an accepted write, since each one the generator draws changes its record."""
    env = gym.make("trace/multi_step_task_completion-v0").unwrapped
    for seed in [*range(150), *range(1_000_000_000, 1_000_000_150)]:
        env.reset(seed=seed)
        ep = env.episode
        for op in ep.task.operations:
            world = ep.initial_world.fork()
            ep.toolset[op["write"]["name"]].fn(world, **op["write"]["arguments"])
            table, key = op["record"]
            assert world.tables[table].get(key) != ep.initial_world.tables[table].get(key), (seed, op)
