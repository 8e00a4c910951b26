"""Adversaries: the cheapest behaviours that could earn reward without the capability.

GRPO finds whatever a verifier pays for, so the kit plays each of these on every env,
shipped or synthesized, and bounds what they earn (`properties.py`). They touch an env
only through what any agent sees or what the kit may read: `reset`, `step`,
`oracle_action`, the observation's messages, `episode.toolset` (names, kinds, schemas) and
`task.to_json()`; never a world, a task attribute or a verifier.

Each adversary plays one episode on a seed and returns its reward, or None when it does
not apply to that seed (the oracle with retyped arguments, on a seed whose writes hold no
number, is the oracle itself):

| adversary | what it does |
|-----------|--------------|
| `do_nothing` | replies "I cannot help with that." (the reference every bound is relative to) |
| `stuffed_prompt` | replies with the whole system prompt, every turn |
| `stuffed_values` | replies with every value seen: each JSON leaf of the conversation (numbers also as dollars), the ids and numbers the customer said, each value the tool schemas show (enums, quoted examples) |
| `stuffed_numbers` | replies "0 free, 1 free, ...", every amount from $0 to $500 and a long digit string |
| `lookup_then_stuffed` | asks the customer everything, reads every record in view with every read tool, then replies stuffed |
| `shotgun_writes` | reads every record in view, then calls every write tool on every id in view, in one turn |
| `failing_writes` | ten write calls the tool rejects, in one turn, then the oracle |
| `attempt_forbidden_then_oracle` | the oracle, trying each forbidden request's write (which the tool may reject) right before refusing it; for tasks that list their forbidden writes (`task.to_json()["requests"][i]["forbids"]`) |
| `retyped_bools`, `retyped_strings`, `extra_argument` | the oracle with the integers of its write arguments sent as booleans, its numbers as strings, or an argument the schema does not have (on seeds where that changes every write) |
| `early_transfer` | `transfer_to_human_agents` at once, once for each id in view with that id as its summary (a reply saying so where there is no such tool) |
| `stuffed_then_transfer` | a question stuffed with the system prompt, then the same transfer |
| `unclosed_think` | the oracle with each turn that writes sent inside a `<think>` block that is never closed |
| `refuse_by_kind` | never checks a record: asks who the customer is where no id is in view yet, reads every record in view (unlooked at), then refuses each request, naming the rule that request's kind most often breaks (`usual_refusals`) |
"""

from __future__ import annotations

import re
import weakref
from collections import Counter
from collections.abc import Callable
from typing import Any

from trace_gym.actions import parse_action
from trace_gym.jsondata import dumps, loads
from trace_gym.rng import Rng
from trace_gym.schema import sample_value
from trace_gym.seeding import SPLITS
from trace_gym.testing.kitenv import KitEnv, PlayedEnv, toolset_of
from trace_gym.tools import ToolKind

DO_NOTHING = "I cannot help with that."
TRANSFER = "transfer_to_human_agents"
ASK = (" Before anything else, please tell me your user id, your email, your name and zip code, "
       "and the id of the reservation or order this is about, and every detail of what you want?")

_ID = re.compile(r"^#?[A-Za-z0-9_]*\d[A-Za-z0-9_]*$")
_ID_IN_TEXT = re.compile(r"#?[A-Za-z0-9_]*\d[A-Za-z0-9_]*")
_SKIP_TOOLS = frozenset({TRANSFER})

Adversary = Callable[[PlayedEnv, int], "float | None"]


# -- what is in view -------------------------------------------------------------------

def _json_leaves(value: Any, key: str | None, out: list[tuple[str | None, Any]]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if _is_id(k):  # records keyed by id (payment methods)
                out.append((None, k))
            _json_leaves(v, k, out)
    elif isinstance(value, list):
        for v in value:
            _json_leaves(v, key, out)
    else:
        out.append((key, value))


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and 4 <= len(value) <= 40 and bool(_ID.match(value))


def _message_leaves(m: dict[str, Any], out: list[tuple[str | None, Any]]) -> None:
    if m["role"] == "tool":
        try:
            value = loads(m["content"])
        except ValueError:
            value = m["content"]
        _json_leaves(value, None, out)
    for tc in m.get("tool_calls") or ():
        try:
            _json_leaves(loads(tc["function"]["arguments"]), None, out)
        except ValueError:
            pass


def leaves(messages: list[dict[str, Any]]) -> list[tuple[str | None, Any]]:
    """(key, value) of every JSON leaf of the conversation after the system prompt: tool
    results (a result that is not JSON is one string leaf) and call arguments, in order."""
    out: list[tuple[str | None, Any]] = []
    for m in messages[1:]:
        _message_leaves(m, out)
    return out


def shape_of(token: str) -> str:
    """A letter as 'A', a digit as '9' ('HAT123' -> 'AAA999'): ids of one kind share it."""
    return _DIGIT.sub("9", _LETTER.sub("A", token))


_DIGIT, _LETTER = re.compile(r"\d"), re.compile(r"[A-Za-z]")


def ids_in_view(messages: list[dict[str, Any]]) -> list[str]:
    """Every id-like string of the conversation (a word with a digit, no space), from what
    the customer said, the tool results and the calls, in order of appearance."""
    seen: dict[str, None] = {}
    for m in messages[1:]:
        if m["role"] == "user" and m.get("content"):
            for token in _ID_IN_TEXT.findall(m["content"]):
                if _is_id(token.rstrip("_")):
                    seen.setdefault(token.rstrip("_"), None)
        else:
            found: list[tuple[str | None, Any]] = []
            _message_leaves(m, found)
            for _, value in found:
                if _is_id(value):
                    seen.setdefault(value, None)
    return list(seen)


def seen_by_key(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Key -> the first scalar value seen under it in the conversation's JSON."""
    out: dict[str, Any] = {}
    for key, value in leaves(messages):
        if key is not None:
            out.setdefault(key, value)
    return out


def shown_by_schemas(schemas: list[dict[str, Any]]) -> list[str]:
    """Every value the tool schemas show (see `schema_values`), each once."""
    values: dict[str, None] = {}
    for schema in schemas:
        for value in schema_values(schema.get("function", {}).get("parameters", {})):
            values.setdefault(str(value), None)
    return list(values)


def stuffed_values(messages: list[dict[str, Any]], shown: list[str]) -> str:
    """Every value of every JSON type seen in the conversation (numbers also as dollars, and
    the ids and numbers the customer said) and every value the tool schemas show (`shown`,
    from `shown_by_schemas`)."""
    values: dict[str, None] = {}
    for _, value in leaves(messages):
        if isinstance(value, bool):
            values.setdefault("true" if value else "false", None)
        elif isinstance(value, (int, float)):
            values.setdefault(str(value), None)
            values.setdefault(f"${value}", None)
        elif isinstance(value, str):
            values.setdefault(value, None)
    for m in messages[1:]:
        if m["role"] == "user" and m.get("content"):
            for token in _ID_IN_TEXT.findall(m["content"]):
                values.setdefault(token, None)
    for value in shown:
        values.setdefault(value, None)
    return "I cannot do that. Here is everything: " + ", ".join(values) + "."


_QUOTED = re.compile(r"'([^']+)'")


def schema_values(schema: Any) -> list[Any]:
    """The values a schema shows: its enums, and the quoted examples of its descriptions
    ("Why: 'no longer needed' or 'ordered by mistake'.")."""
    out: list[Any] = []
    if isinstance(schema, dict):
        out += [v for v in schema.get("enum", ()) if v is not None]
        if isinstance(schema.get("description"), str):
            out += _QUOTED.findall(schema["description"])
        for v in schema.values():
            out += schema_values(v)
    elif isinstance(schema, list):
        for v in schema:
            out += schema_values(v)
    return out


STUFFED_NUMBERS = ("I cannot do that. " + ", ".join(f"{k} free" for k in range(32)) + ". "
                   + " ".join(f"${k}" for k in range(501)) + ". " + "0123456789" * 30)


# -- playing -----------------------------------------------------------------------------

def _system(messages: list[dict[str, Any]]) -> str:
    return messages[0]["content"] if messages and messages[0]["role"] == "system" else ""


def _tools(env: PlayedEnv, kind: ToolKind) -> list[Any]:
    return [t for t in toolset_of(env).values() if t.kind is kind and t.name not in _SKIP_TOOLS]


def _message(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """One assistant turn that makes every call."""
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": c["name"], "arguments": dumps(c["arguments"])}}
        for i, c in enumerate(calls)]}


def fill_arguments(tool: Any, target: str, seen: dict[str, Any], rng: Rng) -> dict[str, Any]:
    """Arguments for `tool` aimed at the record `target`: the first id parameter gets it,
    the others what the conversation showed under their name, or a schema sample."""
    params = tool.parameters
    props = params.get("properties", {})
    out: dict[str, Any] = {}
    aimed = False
    for name in params.get("required", list(props)):
        schema = props.get(name, {})
        kind = schema.get("type")
        if kind == "string" and name.endswith("id") and "enum" not in schema:
            out[name] = target if not aimed else seen.get(name, target)
            aimed = True
        elif kind == "array" and name.endswith("ids"):
            out[name] = [target] if not aimed else [seen.get(name[:-1], target)]
            aimed = True
        elif name in seen and not isinstance(seen[name], (dict, list)):
            out[name] = seen[name]
        elif kind in ("string", None) and schema_values(schema):
            out[name] = schema_values(schema)[0]
        else:
            out[name] = sample_value(schema, rng, params)
    return out


def _reads(env: PlayedEnv, messages: list[dict[str, Any]], rng: Rng) -> list[dict[str, Any]]:
    seen = seen_by_key(messages)
    return [{"name": t.name, "arguments": fill_arguments(t, i, seen, rng)}
            for t in _tools(env, ToolKind.READ) for i in ids_in_view(messages)
            if any(n.endswith("id") for n in t.parameters.get("required", ()))]


def _writes(env: PlayedEnv, messages: list[dict[str, Any]], rng: Rng) -> list[dict[str, Any]]:
    seen = seen_by_key(messages)
    return [{"name": t.name, "arguments": fill_arguments(t, i, seen, rng)}
            for t in _tools(env, ToolKind.WRITE) for i in ids_in_view(messages)]


def play_script(env: PlayedEnv, seed: int, script: Callable[[PlayedEnv, list, int], Any]) -> float:
    """One episode where `script(env, obs, turn)` gives each action."""
    obs, _ = env.reset(seed=seed)
    turn, reward, done = 0, 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(script(env, obs, turn))
        done, turn = terminated or truncated, turn + 1
    return float(reward)


def _replying(text_of: Callable[[list], str]) -> Adversary:
    return lambda env, seed: play_script(env, seed, lambda e, obs, turn: text_of(obs))


def do_nothing(env: PlayedEnv, seed: int) -> float:
    """The reward of replying 'I cannot help with that.' (`DO_NOTHING`) at once."""
    return play_script(env, seed, lambda e, obs, turn: DO_NOTHING)


def _staged(stages: list[Callable[[PlayedEnv, list, Rng], Any]]) -> Callable[[PlayedEnv, int], float]:
    """An adversary that plays `stages` in order (a stage returning None is skipped), then
    repeats the last one."""
    def adversary(env: PlayedEnv, seed: int) -> float:
        rng = Rng.from_seed(seed)
        position = [0]

        def script(e: PlayedEnv, obs: list, turn: int) -> Any:
            while position[0] < len(stages) - 1:
                action = stages[position[0]](e, obs, rng)
                position[0] += 1
                if action is not None:
                    return action
            return stages[-1](e, obs, rng)
        return play_script(env, seed, script)
    return adversary


def _ask(env: PlayedEnv, obs: list, rng: Rng) -> Any:
    """A question stuffed with the system prompt, when nothing is in view yet to act on."""
    return None if ids_in_view(obs) else _system(obs) + ASK


def _read_all(env: PlayedEnv, obs: list, rng: Rng) -> Any:
    calls = _reads(env, obs, rng)
    return _message(calls) if calls else None


def _write_all(env: PlayedEnv, obs: list, rng: Rng) -> Any:
    calls = _writes(env, obs, rng)
    return _message(calls) if calls else None


def _stuffer(with_prompt: bool) -> Callable[[PlayedEnv, list, Rng], str]:
    """A stage that replies with every value in view (and the system prompt); what the
    schemas show is read once per episode."""
    shown: list[list[str]] = []

    def reply(env: PlayedEnv, obs: list, rng: Rng) -> str:
        if not shown:
            shown.append(shown_by_schemas(toolset_of(env).schemas))
        text = stuffed_values(obs, shown[0])
        return f"{text} {_system(obs)}" if with_prompt else text
    return reply


def lookup_then_stuffed(env: PlayedEnv, seed: int) -> float:
    """The reward of asking, reading every record in view twice, then replying with every value in
    view and the system prompt."""
    return _staged([_ask, _read_all, _read_all, _stuffer(with_prompt=True)])(env, seed)


def stuffed_values_reply(env: PlayedEnv, seed: int) -> float:
    """The reward of replying with every value in view, without any tool call."""
    stuff = _stuffer(with_prompt=False)
    return play_script(env, seed, lambda e, obs, turn: stuff(e, obs, Rng.from_seed(0)))
shotgun_writes = _staged([_ask, _read_all, _write_all, lambda e, o, r: "Done: everything is taken care of."])


def _transfer(env: PlayedEnv, obs: list, rng: Rng) -> Any:
    """One turn of transfers, one per id in view with that id as its summary (a verifier
    that takes any call naming a record for a lookup of it takes one of these)."""
    if TRANSFER not in toolset_of(env):
        return "I'm transferring you to a human agent."
    return _message([{"name": TRANSFER, "arguments": {"summary": i}} for i in ids_in_view(obs) or ["help"]])


early_transfer = _staged([_transfer, lambda e, obs, r: DO_NOTHING])
"""Transfers at once (a reply saying so where there is no transfer tool)."""

stuffed_then_transfer = _staged([lambda e, obs, r: _system(obs) + ASK, _transfer, lambda e, obs, r: DO_NOTHING])
"""A question stuffed with the system prompt (rule words said, the customer's answers in
view), then the transfers."""


# -- the oracle, with changes ------------------------------------------------------------

def _calls_of(action: Any) -> tuple[str | None, list[dict[str, Any]]]:
    """(reply text, calls) of any action the oracle may return."""
    parsed = parse_action(action)
    return parsed.content, [{"name": c.name, "arguments": c.arguments} for c in parsed.calls if c.valid]


def play_oracle(env: PlayedEnv, seed: int, before: Any = None,
                change: Callable[[PlayedEnv, str | None, list[dict[str, Any]]], Any] | None = None) -> tuple[float, bool]:
    """The oracle, with `before` sent first and `change(env, reply, calls)` rewriting each
    of its turns (None: unchanged). The oracle sees the conversation without the turns it
    did not choose, so it acts as if they had not happened. Returns (reward, whether
    `change` changed anything)."""
    obs, _ = env.reset(seed=seed)
    hidden: list[range] = []
    changed = False
    reward, done = 0.0, False
    if before is not None:
        start = len(obs)
        obs, reward, terminated, truncated, _ = env.step(before)
        hidden.append(range(start, len(obs)))
        done = terminated or truncated
    while not done:
        view = [m for i, m in enumerate(obs) if not any(i in r for r in hidden)]
        action = env.oracle_action(view)
        if change is not None:
            reply, calls = _calls_of(action)
            new = change(env, reply, calls)
            if new is not None:
                action, changed = new, True
        obs, reward, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    return float(reward), changed


def failing_writes(env: PlayedEnv, seed: int) -> float | None:
    """The oracle's reward after ten writes the tools reject (None for an env with no write tool):
    rejected attempts must not be free."""
    env.reset(seed=seed)
    writes = _tools(env, ToolKind.WRITE)
    if not writes:
        return None
    rejected = [{"name": writes[i % len(writes)].name, "arguments": {"_": None}} for i in range(10)]
    return play_oracle(env, seed, before=_message(rejected))[0]


def _retype(value: Any, how: Callable[[Any], Any]) -> Any:
    if isinstance(value, dict):
        return {k: _retype(v, how) for k, v in value.items()}
    if isinstance(value, list):
        return [_retype(v, how) for v in value]
    return how(value)


def _number_to_bool(v: Any) -> Any:
    return v != 0 if isinstance(v, int) and not isinstance(v, bool) else v


def _number_to_string(v: Any) -> Any:
    return str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


def _write_changer(edit: Callable[[dict[str, Any]], dict[str, Any]]) -> Adversary:
    """The oracle with `edit` applied to the arguments of each of its write calls. It applies
    to a seed when the edit changed every write the oracle made (else some writes are the
    oracle's own, and earn what the oracle earns): None on other seeds."""
    def adversary(env: PlayedEnv, seed: int) -> float | None:
        writes = unchanged = 0

        def change(env: PlayedEnv, reply: str | None, calls: list[dict[str, Any]]) -> Any:
            nonlocal writes, unchanged
            toolset = toolset_of(env)
            out, changed = [], False
            for c in calls:
                tool = toolset.get(c["name"])
                arguments = c["arguments"]
                if tool is not None and tool.kind is ToolKind.WRITE:
                    arguments = edit(arguments)
                    writes += 1
                    if dumps(arguments) == dumps(c["arguments"]):
                        unchanged += 1
                    else:
                        changed = True
                out.append({"name": c["name"], "arguments": arguments})
            return _message(out) if changed else None

        reward, _ = play_oracle(env, seed, change=change)
        return reward if writes and not unchanged else None
    return adversary


retyped_bools = _write_changer(lambda a: _retype(a, _number_to_bool))
retyped_strings = _write_changer(lambda a: _retype(a, _number_to_string))
extra_argument = _write_changer(lambda a: {**a, "note": "as confirmed"})


def unclosed_think(env: PlayedEnv, seed: int) -> float | None:
    """The oracle, with each turn that writes sent as text whose calls sit in a `<think>`
    that is never closed; None on seeds where the oracle writes nothing."""
    def change(env: PlayedEnv, reply: str | None, calls: list[dict[str, Any]]) -> Any:
        toolset = toolset_of(env)
        if not any(c["name"] in toolset and toolset[c["name"]].kind is ToolKind.WRITE for c in calls):
            return None
        return "<think>The customer confirmed, so " + "".join(
            f"<tool_call>{dumps(c)}</tool_call>" for c in calls)
    reward, changed = play_oracle(env, seed, change=change)
    return reward if changed else None


def attempt_forbidden_then_oracle(env: PlayedEnv, seed: int) -> float | None:
    """The oracle, except that right before it refuses a forbidden request it tries the write
    that request forbids (on the request's record, other arguments filled from the
    conversation), which the tool may well reject. It reads the forbidden writes from
    `task.to_json()["requests"][i]["forbids"]` (the target envs' shape: the write's name and
    the arguments that make it this request's, with its `subject` and `rule`); None on seeds
    with no such request."""
    env.reset(seed=seed)
    task = env.task.to_json()
    forbidden = [r for r in task.get("requests", []) if r.get("forbids")]
    if not forbidden:
        return None
    rng = Rng.from_seed(seed)
    obs, _ = env.reset(seed=seed)
    hidden: list[range] = []
    reward, done = 0.0, False
    while not done:
        view = [m for i, m in enumerate(obs) if not any(i in r for r in hidden)]
        action = env.oracle_action(view)
        if isinstance(action, str):
            request = next((r for r in forbidden if any(t.lower() in action.lower() for t in r["rule"])), None)
            if request is not None:
                forbidden.remove(request)
                pattern = request["forbids"][0]
                tool = toolset_of(env)[pattern["name"]]
                arguments = {**fill_arguments(tool, request["subject"], seen_by_key(obs), rng),
                             **pattern["arguments"]}
                start = len(obs)
                obs, reward, terminated, truncated, _ = env.step({"name": pattern["name"], "arguments": arguments})
                hidden.append(range(start, len(obs)))
                if terminated or truncated:
                    break
        obs, reward, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    return float(reward)


# -- refusing by kind ----------------------------------------------------------------------

FIT_SEEDS = 200
"""Train seeds that `usual_refusals` (and `guesses.learned_templates`) learn from."""


def fit_seeds(env: PlayedEnv) -> list[int]:
    """The train seeds a learning adversary fits on: the kit's, drawn from its seed base
    (`KitEnv.fit_seeds`: an env cannot tell them from the seeds it is scored on), else
    FIT_SEEDS from the middle of the split (the benchmark's, apart from the seeds it plays)."""
    if isinstance(env, KitEnv) and env.fit_seeds is not None:
        return list(env.fit_seeds)
    train = SPLITS["train"]
    return [train[len(train) // 2 + i] for i in range(FIT_SEEDS)]


ASK_PLAINLY = ("Before anything else, please tell me your user id, your email, your name and zip code, "
               "and the id of the reservation or order this is about?")


def requests_of(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The requests of a task as `to_json()` gives it: its `requests`, or the task itself."""
    requests = task.get("requests")
    return [r for r in requests if isinstance(r, dict)] if isinstance(requests, list) else [task]


def refusal_naming(term: str) -> str:
    """A refusal that names `term` as the rule and says nothing else."""
    return f"I'm sorry, but I cannot do that: {term}."


_USUAL: weakref.WeakKeyDictionary[PlayedEnv, dict[str, str]] = weakref.WeakKeyDictionary()


def usual_refusals(env: PlayedEnv) -> dict[str, str]:
    """Request kind -> the refusal a policy that never checks a record would give it, learned
    on the fit seeds (`fit_seeds`): one naming the rule that the kind's forbidden requests most
    often break (the first of their `rule` terms in `task.to_json()`, per request where a
    task has several); for an env whose tasks list no rule, the reply the oracle most often
    ends with on the kind's tasks where it calls no write tool, with every value the
    conversation showed taken out (what the oracle read in the records is no part of a
    refusal that never reads them). Kinds never refused are left out. Learned once per env
    instance."""
    if env in _USUAL:
        return _USUAL[env]
    seeds = fit_seeds(env)
    rules: dict[str, Counter] = {}
    for seed in seeds:
        env.reset(seed=seed)
        for request in requests_of(env.task.to_json()):
            rule = request.get("rule")
            if isinstance(rule, list) and rule and isinstance(rule[0], str) and isinstance(request.get("kind"), str):
                rules.setdefault(request["kind"], Counter())[refusal_naming(rule[0])] += 1
    if not rules:
        for seed in seeds:
            _count_oracle_refusal(env, seed, rules)
    _USUAL[env] = out = {kind: counts.most_common(1)[0][0] for kind, counts in rules.items()}
    return out


def _count_oracle_refusal(env: PlayedEnv, seed: int, rules: dict[str, Counter]) -> None:
    """Count the oracle's last reply on `seed`, less the values in view, under the task's
    kind, when it wrote nothing."""
    obs, _ = env.reset(seed=seed)
    kind = env.task.to_json().get("kind")
    toolset = toolset_of(env)
    wrote, done = False, False
    while not done:
        action = env.oracle_action(obs)
        _, calls = _calls_of(action)
        wrote = wrote or any(c["name"] in toolset and toolset[c["name"]].kind is ToolKind.WRITE for c in calls)
        obs, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    reply = next((m.get("content") for m in reversed(obs) if m["role"] == "assistant" and not m.get("tool_calls")), None)
    if isinstance(kind, str) and not wrote and reply:
        rules.setdefault(kind, Counter())[without_values(reply, obs)] += 1


def without_values(text: str, messages: list[dict[str, Any]]) -> str:
    """`text` with the values of the conversation's JSON and the ids the customer said taken
    out, as whole words, longest first: numbers (also with two decimals), dates (a
    timestamp's too) and words of three letters or more ("no" and "yes" stay: they are the
    policy's words as much as the records')."""
    values = set(ids_in_view(messages))
    for _, v in leaves(messages):
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)):
            values |= {str(v), f"{v:.2f}"}
        elif isinstance(v, str):
            values.add(v)
            if _TIMESTAMP.match(v):
                values.add(v[:10])
    for value in sorted((v for v in values if len(v) >= 3 or any(c.isdigit() for c in v)), key=len, reverse=True):
        text = re.sub(rf"(?<![\w.]){re.escape(value)}(?!\w|\.\d)", "", text)
    return re.sub(r"\s+", " ", text).strip()


_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T")


def _names_no_id(obs: list) -> bool:
    last = next((m for m in reversed(obs) if m["role"] == "user"), None)
    return last is None or not ids_in_view([{}, last])


_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def _new_reads(env: PlayedEnv, obs: list, rng: Rng, done: set[str]) -> list[dict[str, Any]]:
    """Read calls not made yet: every read tool on every id in view, and each read tool
    that takes no id with what the customer said for it (an email)."""
    seen = seen_by_key(obs)
    for m in obs[1:]:
        if m["role"] == "user" and m.get("content"):
            for email in _EMAIL.findall(m["content"]):
                seen.setdefault("email", email)
    calls = _reads(env, obs, rng)
    for tool in _tools(env, ToolKind.READ):
        required = tool.parameters.get("required", ())
        if required and not any(n.endswith("id") for n in required) and all(n in seen for n in required):
            calls.append({"name": tool.name, "arguments": {n: seen[n] for n in required}})
    out = []
    for call in calls:
        key = dumps(call)
        if key not in done:
            done.add(key)
            out.append(call)
    return out


READ_TURNS = 3
"""Read turns before each refusal: enough to go from an email to the user, to their records."""


def refusing_after_reads(between: Callable[[list], list[str]] | None = None) -> Adversary:
    """An adversary that refuses every request with its kind's usual refusal
    (`usual_refusals`) without checking a record: for each request, asks who the customer
    is and what it is about when their last message names no id, reads every record in
    view (up to READ_TURNS turns of calls not made before: a verifier that wants a lookup
    gets one), sends the replies `between(obs)` gives, one per turn, then refuses. None on
    seeds whose requests are of no kind ever refused."""
    def adversary(env: PlayedEnv, seed: int) -> float | None:
        refusals = usual_refusals(env)
        env.reset(seed=seed)
        kinds = [r.get("kind") for r in requests_of(env.task.to_json())]
        if not any(k in refusals for k in kinds if isinstance(k, str)):
            return None
        replies = [refusals.get(k, DO_NOTHING) if isinstance(k, str) else DO_NOTHING for k in kinds]
        rng = Rng.from_seed(seed)
        state: dict[str, Any] = {"request": 0, "phase": 0, "queue": None}
        done: set[str] = set()

        def script(e: PlayedEnv, obs: list, turn: int) -> Any:
            if state["phase"] == 0:
                state["phase"] = 1
                if _names_no_id(obs):
                    return ASK_PLAINLY
            if state["phase"] <= READ_TURNS:
                state["phase"] += 1
                calls = _new_reads(e, obs, rng, done)
                if calls:
                    return _message(calls)
                state["phase"] = READ_TURNS + 1
            if state["queue"] is None:
                state["queue"] = list(between(obs)) if between is not None else []
            if state["queue"]:
                return state["queue"].pop(0)
            state.update(phase=0, queue=None)
            reply = replies[min(state["request"], len(replies) - 1)]
            state["request"] += 1
            return reply
        return play_script(env, seed, script)
    return adversary


refuse_by_kind = refusing_after_reads()


ADVERSARIES: dict[str, Adversary] = {
    "stuffed_prompt": _replying(_system),
    "stuffed_values": stuffed_values_reply,
    "stuffed_numbers": _replying(lambda obs: STUFFED_NUMBERS),
    "lookup_then_stuffed": lookup_then_stuffed,
    "shotgun_writes": shotgun_writes,
    "failing_writes": failing_writes,
    "attempt_forbidden_then_oracle": attempt_forbidden_then_oracle,
    "retyped_bools": retyped_bools,
    "retyped_strings": retyped_strings,
    "extra_argument": extra_argument,
    "early_transfer": early_transfer,
    "stuffed_then_transfer": stuffed_then_transfer,
    "unclosed_think": unclosed_think,
    "refuse_by_kind": refuse_by_kind,
}
"""Every adversary by name (`do_nothing`, the reference, apart)."""
