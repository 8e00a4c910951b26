"""The properties every trace-gym env must have. Each is a function of an EnvRef and the
kit's settings that returns a detail string, or raises PropertyFailed saying what broke."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import fastjsonschema
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from trace_gym.actions import parse_action
from trace_gym.jsondata import canonical_json, sha256_json
from trace_gym.rng import Rng
from trace_gym.seeding import SPLITS
from trace_gym.spaces import is_valid_message
from trace_gym.testing import adversaries, candidates, guesses, policies, positions
from trace_gym.testing.envref import EnvRef
from trace_gym.testing.leaks import lookup_leak, reset_fields
from trace_gym.testing.wording import MAX_GAIN, request_text, wording_leak
from trace_gym.tools import ToolKind
from trace_gym.worlds import airline, retail

HYPOTHESIS_SEED = 20261129


class PropertyFailed(AssertionError):
    """A property does not hold; the message says where and why."""


@dataclass(frozen=True)
class KitSettings:
    """How hard the kit looks. The defaults keep one run of every property under a minute."""

    examples: int = 20
    """Hypothesis examples per property."""
    oracle_seeds: int = 30
    """Seeds the oracle must score 1.0 on (train and test)."""
    episodes: int = 40
    """Episodes per degenerate policy."""
    soundness_seeds: int = 10
    """Seeds whose oracle is perturbed."""
    distinct_seeds: int = 200
    """Seeds whose tasks must differ."""
    adversary_seeds: int = 200
    """Seeds each adversary plays (half train, half test): enough that an env whose
    do-nothing reply earns 0.30 on average (a refusal's credit for not acting) does not
    exceed 0.35 by the luck of the sample."""
    wording_seeds: int = 2000
    """Train seeds the wording-only classifier is fitted on, and test seeds it is scored on
    (telling a leak of +0.10 from one of +0.05 takes about this many)."""
    gold_seeds: int = 500
    """Seeds whose oracle writes must all go through."""
    target_tools: tuple[dict[str, Any], ...] | None = None
    """The target's tool schemas (default: the airline and retail tools)."""


def _hypothesis(s: KitSettings):
    return settings(max_examples=s.examples, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


def _fail(message: str) -> None:
    raise PropertyFailed(message)


def _seeds(n: int) -> list[int]:
    """n seeds, half from each split (the kit checks both)."""
    train, test = SPLITS["train"], SPLITS["test"]
    return [train[i * 7919 % len(train)] for i in range(n - n // 2)] + [test[i] for i in range(n // 2)]


# -- the properties --------------------------------------------------------------------

def gym_api(ref: EnvRef, s: KitSettings) -> str:
    env = ref.make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    from trace_gym.audit.lock import UnauditedEnvWarning

    # The one expected warning: the env under audit has no passing audit yet.
    messages = [str(w.message) for w in caught if not issubclass(w.category, UnauditedEnvWarning)]
    if messages:
        _fail(f"check_env warned: {messages[0]}")
    for mode in env.metadata.get("render_modes", []):
        rendered = ref.make(render_mode=mode)
        rendered.reset(seed=1)
        with contextlib.redirect_stdout(io.StringIO()):
            out = rendered.render()
        if mode == "ansi" and not isinstance(out, str):
            _fail(f"render() in mode 'ansi' returned {type(out).__name__}, expected str")
    return "check_env passed with no warning"


def determinism(ref: EnvRef, s: KitSettings) -> str:
    first, second = ref.make(), ref.make()

    @_hypothesis(s)
    @hypothesis_seed(HYPOTHESIS_SEED)
    @given(st.integers(0, 2**31 - 1))
    def check(seed: int) -> None:
        a, b = policies.fingerprint(first, seed), policies.fingerprint(second, seed)
        again = policies.fingerprint(first, seed)
        if a != b or a != again:
            _fail(f"seed {seed} gave different tasks, worlds or oracle transcripts")

    check()
    return f"{s.examples} seeds reproduced in two env instances"


def determinism_across_processes(ref: EnvRef, s: KitSettings) -> str:
    """The same seeds in two fresh env workers with different PYTHONHASHSEED."""
    seeds = _seeds(max(4, s.examples // 4))
    prints = []
    for hash_seed in ("1", "2"):
        with ref.fresh_process({"PYTHONHASHSEED": hash_seed}) as env:
            prints.append({seed: policies.fingerprint(env, seed) for seed in seeds})
    if prints[0] != prints[1]:
        differing = [seed for seed in seeds if prints[0][seed] != prints[1][seed]]
        _fail(f"seeds {differing[:5]} differ between two processes (PYTHONHASHSEED 1 and 2): "
              f"the task depends on something other than the seed")
    return f"{len(seeds)} seeds identical in two processes"


def oracle_solves(ref: EnvRef, s: KitSettings) -> str:
    env = ref.make()
    for seed in _seeds(s.oracle_seeds):
        reward, _, info = policies.play(env, seed, policies.oracle)
        if reward < 1.0 - 1e-9:
            _fail(f"the oracle scored {reward} on seed {seed}: {info.get('verdict')}")
    return f"oracle scored 1.0 on {s.oracle_seeds} seeds"


def verifier_soundness(ref: EnvRef, s: KitSettings) -> str:
    env = ref.make()
    tried = 0
    for seed in _seeds(s.soundness_seeds):
        for description, actions in policies.perturbed_oracles(env, seed):
            reward, _, _ = policies.play(env, seed, policies.replay(actions))
            tried += 1
            if reward >= 1.0 - 1e-9:
                _fail(f"seed {seed}: the oracle with {description} still scored 1.0 (the verifier "
                      f"does not check it)")
    return f"{tried} perturbed oracles all scored below 1"


MAX_ADVERSARY_MEAN = 0.35
"""The most any adversary bounded by doing nothing may average."""
OVER_BASELINE = 0.05
"""How much more than its baseline (doing nothing, unless it has another), on the same
seeds of each split, an adversary may average."""


@dataclass(frozen=True)
class Family:
    """Adversaries of one kind and what bounds them (`bounded`)."""

    players: Callable[[], dict[str, adversaries.Adversary]]
    """The adversaries by name (made when asked: the degenerate policies are functions)."""
    baselines: Callable[[], dict[str, adversaries.Adversary]] = dict
    """Adversary name -> the honest but weak policy that bounds it (the first candidate, a
    random available choice); the others are bounded by doing nothing."""
    on_average: bool = False
    """Bounded on the mean only, not seed by seed: a guess is right by chance on some seeds."""
    cap: float | None = MAX_ADVERSARY_MEAN
    """The most an adversary bounded by doing nothing may average, whatever doing nothing
    earns (None: only the bound relative to doing nothing)."""
    seed_factor: int = 1
    """Plays `seed_factor` times the kit's adversary seeds: a guess right by chance gains
    about as much as the bound allows, and telling the two apart takes more seeds."""


def _named(*names: str) -> Callable[[], dict[str, adversaries.Adversary]]:
    return lambda: {name: adversaries.ADVERSARIES[name] for name in names}


def _degenerate() -> dict[str, adversaries.Adversary]:
    return {name: (lambda env, seed, act=act: policies.play(env, seed, act)[0])
            for name, act in policies.degenerate_policies().items()}


FAMILIES: dict[str, Family] = {
    "degenerate_policies": Family(_degenerate),
    "stuffed_replies": Family(_named("stuffed_prompt", "stuffed_values", "stuffed_numbers", "lookup_then_stuffed")),
    "shotgun_writes": Family(_named("shotgun_writes")),
    "failing_writes": Family(_named("failing_writes", "attempt_forbidden_then_oracle")),
    "retyped_writes": Family(_named("retyped_bools", "retyped_strings", "extra_argument")),
    "early_transfer": Family(_named("early_transfer", "stuffed_then_transfer")),
    "refuse_by_kind": Family(_named("refuse_by_kind"), on_average=True, seed_factor=5),
    "candidate_answers": Family(lambda: {n: pair[0] for n, pair in candidates.CANDIDATE_ADVERSARIES.items()},
                                lambda: {n: pair[1] for n, pair in candidates.CANDIDATE_ADVERSARIES.items()}),
    "choice_positions": Family(lambda: dict(positions.POSITION_ADVERSARIES),
                               lambda: {n: positions.random_available for n in positions.POSITION_ADVERSARIES},
                               on_average=True, seed_factor=10),
    "guessed_facts": Family(lambda: {n: guesses.GUESSED_VARIANTS[n] for n in guesses.KIT_VARIANTS},
                            on_average=True, cap=None, seed_factor=10),
}
"""Every family of adversaries the kit bounds, by the name of its property."""


def _split_of(seed: int) -> str:
    return "train" if seed in SPLITS["train"] else "test"


def bounded(ref: EnvRef, s: KitSettings, family: Family) -> str:
    """Every adversary of `family`, on the train seeds and on the test seeds apart (over
    those it applies to), averages at most its baseline's mean plus OVER_BASELINE, the
    baseline being the family's for it or else the do-nothing reply, which also caps it at
    the family's `cap`; and, unless the family is bounded on average only, it scores 1.0 on
    no seed where its baseline scores less (where the oracle's behaviour was needed)."""
    env = ref.make()
    seeds = _seeds(s.adversary_seeds * family.seed_factor)
    nothing = dict(zip(seeds, _do_nothing(ref.to_json(), tuple(seeds))))
    baselines = family.baselines()
    parts = []
    for name, play in family.players().items():
        rewards = {}
        for seed in seeds:
            reward = play(env, seed)
            if reward is not None:
                rewards[seed] = reward
        if not rewards:
            parts.append(f"{name} does not apply")
            continue
        baseline = baselines.get(name)
        reference = nothing if baseline is None else {seed: baseline(env, seed) or 0.0 for seed in rewards}
        what = "doing nothing" if baseline is None else f"its baseline, {baseline.__name__}"
        for split in ("train", "test"):
            played = [seed for seed in rewards if _split_of(seed) == split]
            if not played:
                continue
            mean = sum(rewards[seed] for seed in played) / len(played)
            base = sum(reference[seed] for seed in played) / len(played)
            cap = family.cap if baseline is None else None
            if mean > base + OVER_BASELINE or (cap is not None and mean > cap):
                _fail(f"the {name} adversary scored {mean:.3f} on average over {len(played)} {split} seeds "
                      f"({what}: {base:.3f}); allowed: at most {OVER_BASELINE} above it"
                      + (f" and at most {cap}" if cap is not None else ""))
        lucky = [seed for seed, r in rewards.items() if r >= 1.0 - 1e-9 and reference[seed] < 1.0 - 1e-9]
        if lucky and not family.on_average:
            _fail(f"the {name} adversary scored 1.0 on seed {lucky[0]}, where {what} scores "
                  f"{reference[lucky[0]]} ({len(lucky)} such seeds of {len(rewards)})")
        mean = sum(rewards.values()) / len(rewards)
        base = sum(reference[seed] for seed in rewards) / len(rewards)
        parts.append(f"{name} {mean:.3f}" + (f" against {base:.3f}" if baseline is not None else "")
                     + f" ({len(rewards)} seeds)")
    do_nothing = sum(nothing.values()) / len(nothing)
    return f"doing nothing {do_nothing:.3f}; " + ", ".join(parts)


@functools.lru_cache(maxsize=8)
def _do_nothing(ref_json: str, seeds: tuple[int, ...]) -> tuple[float, ...]:
    """The do-nothing reply's rewards, played once per env and seeds for the several
    properties that compare with it (a pure function of its arguments: a memo)."""
    env = EnvRef.from_json(ref_json).make()
    return tuple(adversaries.do_nothing(env, seed) for seed in seeds)


def degenerate_policies(ref: EnvRef, s: KitSettings) -> str:
    """Random calls, always refusing, the first write with sampled arguments."""
    return bounded(ref, s, FAMILIES["degenerate_policies"])


def stuffed_replies(ref: EnvRef, s: KitSettings) -> str:
    """Replies that say everything at once: the system prompt, every value in view, every
    number; and the same after reading every record in view."""
    return bounded(ref, s, FAMILIES["stuffed_replies"])


def shotgun_writes(ref: EnvRef, s: KitSettings) -> str:
    """Every write tool called on every id in view."""
    return bounded(ref, s, FAMILIES["shotgun_writes"])


def failing_writes(ref: EnvRef, s: KitSettings) -> str:
    """Writes the tool rejects are not free: ten of them before the oracle, or a forbidden
    request's write tried before the oracle refuses it."""
    return bounded(ref, s, FAMILIES["failing_writes"])


def retyped_writes(ref: EnvRef, s: KitSettings) -> str:
    """The oracle whose write arguments break the schema (integers as booleans, numbers as
    strings, an argument the tool does not take): a call the tool rejects earns nothing."""
    return bounded(ref, s, FAMILIES["retyped_writes"])


def early_transfer(ref: EnvRef, s: KitSettings) -> str:
    """A transfer to a human with every id in view as the summary, at once or after a
    question stuffed with the system prompt: a transfer is not a lookup."""
    return bounded(ref, s, FAMILIES["early_transfer"])


def refuse_by_kind(ref: EnvRef, s: KitSettings) -> str:
    """Refusing every request with the rule its kind most often breaks, without checking a
    record: a refusal must say what only the records show (the fact that breaks the rule).
    Bounded on average only, over five times the adversary seeds: where a kind's
    forbidden requests all break one rule whose name is the record's own value ("basic
    economy"), this refusal is the oracle's on them, and no verifier can tell the two apart
    on those seeds (about 0.03 on airline, in each split)."""
    return bounded(ref, s, FAMILIES["refuse_by_kind"])


def candidate_answers(ref: EnvRef, s: KitSettings) -> str:
    """Trying each candidate in turn, stating one value per message or proposing one
    summary after another until the customer says yes, earns no more than committing to
    the first candidate (`trace_gym.testing.candidates`)."""
    return bounded(ref, s, FAMILIES["candidate_answers"])


def choice_positions(ref: EnvRef, s: KitSettings) -> str:
    """Every list an agent chooses from (variants, flights, payment methods, orders) is
    ordered independently of the answer: for each id the oracle's writes chose from a list
    (`trace_gym.testing.positions.oracle_choices`), each position rule (first, second,
    last, last available, ...) picks the answer, on the train and on the test seeds apart,
    at most OVER_BASELINE more often than a random available pick would (or three standard
    errors of that share, where a split has too few choices to tell 0.05). The kit counts
    choices, not rewards: rewards of 0 or 1 over the few hundred seeds where a choice
    exists differ by 0.05 by chance alone, where the picks over all of a split's choices
    tell a leak from chance; `benchmarks/reward_integrity.py` plays the rules for their
    rewards, against `random_available`, on ten times the seeds."""
    env = ref.make()
    family = FAMILIES["choice_positions"]
    seeds = _seeds(s.adversary_seeds * family.seed_factor)
    parts = []
    for split in ("train", "test"):
        choices = [c for seed in seeds if _split_of(seed) == split for c in positions.oracle_choices(env, seed)]
        if not choices:
            continue
        chance = sum(positions.chance_of(c) for c in choices) / len(choices)
        allowed = max(OVER_BASELINE, 3 * (chance * (1 - chance) / len(choices)) ** 0.5)
        unused = Rng.from_seed(0)  # the position rules draw nothing
        for name, rule in positions.RULES.items():
            hits = sum(rule(c.candidates, unused) == c.answer for c in choices) / len(choices)
            if hits > chance + allowed:
                _fail(f"the {name} rule picks the answer of {hits:.3f} of the {len(choices)} choices of the {split} "
                      f"seeds, a random available pick {chance:.3f}; allowed: at most {allowed:.3f} more: a list "
                      f"is ordered by its answer")
            parts.append(f"{split} {name} {hits:.3f}")
        parts.append(f"{split} random {chance:.3f} ({len(choices)} choices)")
    return ", ".join(parts) if parts else "no write chooses an id from a list"


def guessed_facts(ref: EnvRef, s: KitSettings) -> str:
    """A refusal learned from the oracle's, its record facts guessed from the request's kind
    and the customer's words, sent at once (`trace_gym.testing.guesses`): the facts a refusal
    must state follow from the records only, so a guess is right no more often than chance
    over the facts' range. Bounded on average, over ten times the adversary seeds: a guess
    right by chance on a fifth of one kind's forbidden requests earns about 0.05."""
    return bounded(ref, s, FAMILIES["guessed_facts"])


def reset_leak(ref: EnvRef, s: KitSettings) -> str:
    """What the agent sees before its first tool call (each field of the reset's `info`
    and each message of the observation, hinted and unhinted) may not tell the task's
    decision: a lookup table over the exact values of each field, and of each pair of
    fields, fitted on `wording_seeds` train seeds, predicts the decision of as many test
    seeds no better than the majority class plus MAX_GAIN."""
    env = ref.make()
    return _decision_leak(s, lambda seeds: reset_fields(env, seeds), lookup_leak, "what the agent sees at reset")


def wording_only(ref: EnvRef, s: KitSettings) -> str:
    """The request's words alone may not tell the task's decision (`task.to_json()["decision"]`)
    better than the majority class by more than MAX_GAIN of the test tasks."""
    env = ref.make()

    def tasks(seeds: list[int]) -> list[tuple[str, str]]:
        out = []
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            decision = env.task.to_json().get("decision")
            if decision is not None:
                out.append((request_text(obs), canonical_json(decision)))
        return out

    return _decision_leak(s, tasks, wording_leak, "the request's wording")


def _decision_leak(s: KitSettings, collect: Callable[[list[int]], list[Any]], judge: Callable[[list, list], Any],
                   what: str) -> str:
    """Fit `judge` on what `collect` gives for `wording_seeds` train seeds, score it on as
    many test seeds: it may not beat the majority class by more than MAX_GAIN."""
    train, test = SPLITS["train"], SPLITS["test"]
    fitted = collect([train[i * 7919 % len(train)] for i in range(s.wording_seeds)])
    scored = collect([test[i] for i in range(s.wording_seeds)])
    if not fitted or not scored:
        return "no task has a decision to infer from the records"
    result = judge(fitted, scored)
    if result.gain > MAX_GAIN:
        _fail(f"{what} gives the decision away: {result.describe()}; allowed: at most "
              f"{MAX_GAIN:+.2f} over the majority class")
    return result.describe()


def oracle_writes_accepted(ref: EnvRef, s: KitSettings) -> str:
    """Every gold write is accepted by the world it was generated for: no write call of the
    oracle gets an 'Error: ...' answer."""
    env = ref.make()
    writes = 0
    for seed in _seeds(s.gold_seeds):
        _, obs, _ = policies.play(env, seed, policies.oracle)
        toolset = env.episode.toolset
        results = {m["tool_call_id"]: m["content"] for m in obs if m["role"] == "tool"}
        for m in obs:
            for tc in m.get("tool_calls") or ():
                tool = toolset.get(tc["function"]["name"])
                if tool is None or tool.kind is not ToolKind.WRITE:
                    continue
                writes += 1
                answer = results.get(tc["id"], "Error: no answer")
                if answer.startswith("Error"):
                    _fail(f"seed {seed}: the oracle's {tc['function']['name']} call was rejected ({answer[:160]}): "
                          f"the gold write does not fit the world it was generated for")
    return f"{writes} oracle writes over {s.gold_seeds} seeds, all accepted"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


def _actions(tool_names: list[str]):
    names = st.sampled_from(tool_names + ["no_such_tool", ""])
    return st.one_of(
        st.text(max_size=120), _json, _json.map(json.dumps),
        st.builds(lambda n, a: {"name": n, "arguments": a}, names, _json),
        st.builds(lambda n, a: f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>", names, _json),
        st.builds(lambda n, a: {"role": "assistant", "content": None, "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": n, "arguments": a}}]}, names, st.text(max_size=30)),
    )


def malformed_actions(ref: EnvRef, s: KitSettings) -> str:
    env = ref.make()
    tool_names = list(env.action_space.toolset)

    @_hypothesis(s)
    @hypothesis_seed(HYPOTHESIS_SEED)
    @given(st.integers(0, 2**31 - 1), st.lists(_actions(tool_names), min_size=1, max_size=5))
    def check(seed: int, actions: list[Any]) -> None:
        obs, _ = env.reset(seed=seed)
        for action in actions:
            try:
                obs, reward, terminated, truncated, _ = env.step(action)
            except MemoryError:  # a resource limit, reported as such by the caller
                raise
            except Exception as exc:  # the property: nothing a model sends raises
                _fail(f"step({action!r:.120}) raised {type(exc).__name__}: {exc}")
            if not 0.0 <= reward <= 1.0:
                _fail(f"reward {reward} outside [0, 1] after {action!r:.120}")
            if not all(is_valid_message(m) for m in obs):
                _fail("the observation holds a message outside the OpenAI wire format")
            parsed = parse_action(action)
            if any(not c.valid for c in parsed.calls) or any(c.name not in tool_names for c in parsed.calls):
                last = [m for m in obs if m["role"] == "tool"][-1:]
                if not last or not last[0]["content"].startswith("Error"):
                    _fail(f"a malformed call got no 'Error: ...' observation: {action!r:.120}")
            if terminated or truncated:
                return

    check()
    return f"{s.examples} fuzzed episodes, no exception, errors reported"


def rewards_in_range(ref: EnvRef, s: KitSettings) -> str:
    env = ref.make()
    for name, act in policies.degenerate_policies(seed=1).items():
        for seed in _seeds(max(4, s.episodes // 4)):
            obs, _ = env.reset(seed=seed)
            done = False
            while not done:
                obs, reward, terminated, truncated, info = env.step(act(env, obs))
                done = terminated or truncated
                if not 0.0 <= reward <= 1.0 or (not done and reward != 0.0):
                    _fail(f"{name} on seed {seed}: reward {reward} (rewards are 0 until the end, then in [0, 1])")
            if "verdict" not in info:
                _fail(f"seed {seed}: the final info has no 'verdict'")
    return "every step reward in [0, 1], 0 before the end, verdict at the end"


def no_leak(ref: EnvRef, s: KitSettings) -> str:
    """The values the agent must find (`task.hidden`) are never in the system or user
    messages. A task must declare them: an env whose task has no `hidden` field fails (an
    empty list says there is nothing to hide)."""
    env = ref.make()
    checked = 0
    for seed in _seeds(s.oracle_seeds):
        obs, _ = env.reset(seed=seed)
        try:
            hidden = env.task.hidden
        except AttributeError:
            _fail(f"seed {seed}: the task has no 'hidden' field; list the values the agent must find out "
                  "(an empty list when there are none)")
        if not isinstance(hidden, (list, tuple)) or not all(isinstance(h, str) for h in hidden):
            _fail(f"seed {seed}: task.hidden must be a list of strings, got {hidden!r:.100}")
        said = [m["content"] for m in obs if m["role"] in ("system", "user") and m.get("content")]
        for secret in (h for h in hidden if h):
            checked += 1
            if any(secret in text for text in said):
                _fail(f"seed {seed}: the answer {secret!r} appears in the system or user messages")
    return f"{checked} hidden values absent from what the agent is told"


def _shape(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _shape(v) for k, v in schema.items() if k not in ("description", "title")}
    if isinstance(schema, list):
        return [_shape(v) for v in schema]
    return schema


def tool_schemas(ref: EnvRef, s: KitSettings) -> str:
    env = ref.make()
    target = s.target_tools or tuple(t.schema for t in (*airline.TOOLS.values(), *retail.TOOLS.values()))
    shapes: dict[str, list[Any]] = {}
    for schema in target:
        shapes.setdefault(schema["function"]["name"], []).append(_shape(schema["function"]["parameters"]))
    seen = set()
    for seed in _seeds(10):
        _, info = env.reset(seed=seed)
        for schema in info["tools"]:
            fn = schema.get("function", {}) if schema.get("type") == "function" else None
            if not fn or not isinstance(fn.get("name"), str) or fn.get("parameters", {}).get("type") != "object":
                _fail(f"not an OpenAI function schema: {json.dumps(schema)[:200]}")
            try:
                fastjsonschema.compile(fn["parameters"])
            except Exception as exc:  # noqa: BLE001  (any compile error means an invalid schema)
                _fail(f"{fn['name']}: parameters are not a valid JSON Schema ({exc})")
            if fn["name"] not in shapes:
                _fail(f"{fn['name']} is not one of the target's tools")
            if _shape(fn["parameters"]) not in shapes[fn["name"]]:
                _fail(f"{fn['name']}: parameters differ from the target's (names, types, nesting or required)")
            seen.add(fn["name"])
    return f"{len(seen)} tools, all valid and the target's own"


def tasks_differ(ref: EnvRef, s: KitSettings) -> str:
    env = ref.make()
    hashes = set()
    for seed in range(s.distinct_seeds):
        env.reset(seed=seed)
        hashes.add(sha256_json(env.task.to_json()))
    if len(hashes) < 0.95 * s.distinct_seeds:
        _fail(f"only {len(hashes)} distinct tasks over {s.distinct_seeds} seeds (at least 95% must differ)")
    return f"{len(hashes)} distinct tasks over {s.distinct_seeds} seeds"


def splits(ref: EnvRef, s: KitSettings) -> str:
    train, test = SPLITS["train"], SPLITS["test"]
    if not (train.stop <= test.start or test.stop <= train.start):
        _fail("the train and test seed ranges overlap")
    env = ref.make()
    n = max(20, s.episodes)

    def tasks(seeds: range) -> set[str]:
        out = set()
        for seed in seeds:
            env.reset(seed=seed)
            out.add(sha256_json(env.task.to_json()))
        return out

    common = tasks(train[:n]) & tasks(test[:n])
    if common:
        _fail(f"{len(common)} task(s) appear under both train and test seeds")
    return f"{n} train and {n} test tasks, none shared"


PROPERTIES: dict[str, Callable[[EnvRef, KitSettings], str]] = {
    "gym_api": gym_api,
    "determinism": determinism,
    "determinism_across_processes": determinism_across_processes,
    "oracle_solves": oracle_solves,
    "rewards_in_range": rewards_in_range,
    "verifier_soundness": verifier_soundness,
    "degenerate_policies": degenerate_policies,
    "oracle_writes_accepted": oracle_writes_accepted,
    "stuffed_replies": stuffed_replies,
    "wording_only": wording_only,
    "reset_leak": reset_leak,
    "candidate_answers": candidate_answers,
    "guessed_facts": guessed_facts,
    "choice_positions": choice_positions,
    "refuse_by_kind": refuse_by_kind,
    "shotgun_writes": shotgun_writes,
    "failing_writes": failing_writes,
    "retyped_writes": retyped_writes,
    "early_transfer": early_transfer,
    "malformed_actions": malformed_actions,
    "no_leak": no_leak,
    "tool_schemas": tool_schemas,
    "tasks_differ": tasks_differ,
    "splits": splits,
}
