"""The properties every trace-gym env must have. Each is a function of an EnvRef and the
kit's settings that returns a detail string, or raises PropertyFailed saying what broke.

Every seed a property plays is drawn from the settings' `seed_base` over the whole train and
test ranges (`seeds`), and every episode goes through `KitEnv`: half the seeds of a plan are
reset with a hint, and a reward that is not a finite number fails the property."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from trace_gym.actions import parse_action
from trace_gym.errors import InvalidConfig
from trace_gym.jsondata import canonical_json, sha256_json
from trace_gym.rng import Rng
from trace_gym.seeding import SPLITS
from trace_gym.spaces import is_valid_message
from trace_gym.testing import adversaries, candidates, guesses, policies, positions, seeds
from trace_gym.testing.envref import EnvRef
from trace_gym.testing.kitenv import KitEnv, PropertyFailed
from trace_gym.testing.leaks import lookup_leak, reset_fields
from trace_gym.testing.wording import MAX_GAIN, request_text, wording_leak
from trace_gym.tools import ToolKind
from trace_gym.worlds import DOMAINS

ONE = 1.0 - 1e-9
"""A reward at least this is full credit. Compare as `reward >= ONE` (or `not reward >= ONE`
for less): False for NaN, so a NaN reward never counts as full credit (the kit's `KitEnv`
refuses it before it gets here)."""


@dataclass(frozen=True)
class KitSettings:
    """How hard the kit looks, and which seeds it looks at. The defaults keep one run of
    every property under a minute."""

    examples: int = 20
    """Hypothesis examples of the fuzzed properties; seeds the determinism check replays."""
    oracle_seeds: int = 30
    """Seeds the oracle must score 1.0 on (train and test)."""
    episodes: int = 40
    """Episodes per degenerate policy."""
    soundness_seeds: int = 10
    """Seeds whose oracle is perturbed."""
    distinct_seeds: int = 200
    """Seeds whose tasks must differ."""
    adversary_seeds: int = 200
    """Seeds each adversary plays (half train, half test, every other one hinted): enough
    that an env whose do-nothing reply earns 0.30 on average (a refusal's credit for not
    acting) does not exceed 0.35 by the luck of the sample."""
    wording_seeds: int = 2000
    """Train seeds the wording-only classifier is fitted on, and test seeds it is scored on
    (telling a leak of +0.10 from one of +0.05 takes about this many)."""
    gold_seeds: int = 500
    """Seeds whose oracle writes must all go through."""
    target_tools: tuple[dict[str, Any], ...] | None = None
    """The target's tool schemas (default: every domain record's tools, airline and retail)."""
    seed_base: int = 0
    """Every seed the kit plays, and Hypothesis's seed, is drawn from this base
    (`trace_gym.testing.seeds`), over the whole train and test ranges. The test suite keeps
    0; `trace-gym audit` draws a new base per audit and records it, so that no env can pay
    only on the seeds one fixed sample visits. A non-negative integer."""

    def __post_init__(self) -> None:
        for name in ("examples", "oracle_seeds", "episodes", "soundness_seeds", "distinct_seeds", "adversary_seeds",
                     "wording_seeds", "gold_seeds"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise InvalidConfig(f"KitSettings.{name}={value!r} is invalid: must be an integer >= 1")
        if type(self.seed_base) is not int or self.seed_base < 0:
            raise InvalidConfig(f"KitSettings.seed_base={self.seed_base!r} is invalid: must be a non-negative "
                                f"integer (the base every seed of the kit is drawn from), e.g. 0")

    def target_schemas(self) -> tuple[dict[str, Any], ...]:
        """The target's tool schemas: `target_tools`, else every domain record's tools."""
        if self.target_tools:
            return self.target_tools
        return tuple(schema for d in DOMAINS.values() for schema in d.tools.schemas)

    @property
    def hypothesis_seed(self) -> int:
        """Hypothesis's seed for the fuzzed properties, drawn from `seed_base`."""
        return seeds.stream(self.seed_base, "hypothesis").below(2**32)

    def plan(self, purpose: str, n: int) -> seeds.Plan:
        """`n` seeds for `purpose`, half train, half test, every other one hinted."""
        return seeds.plan(self.seed_base, purpose, n)


HYPOTHESIS_SEED = KitSettings().hypothesis_seed
"""Hypothesis's seed under the default settings (`KitSettings.hypothesis_seed` for others)."""


def _hypothesis(s: KitSettings):
    def decorate(test: Callable) -> Callable:
        configured = settings(max_examples=s.examples, deadline=None, database=None, derandomize=True,
                              suppress_health_check=list(HealthCheck))(test)
        return hypothesis_seed(s.hypothesis_seed)(configured)
    return decorate


def _fail(message: str) -> NoReturn:
    raise PropertyFailed(message)


def _kit_env(ref: EnvRef, s: KitSettings, plan: seeds.Plan | None = None) -> KitEnv:
    """A new env of `ref` as the kit plays it: resets hinted by `plan`, rewards checked,
    the learning adversaries fitted on train seeds drawn from the seed base."""
    fit = tuple(seeds.draw(s.seed_base, "fit", "train", adversaries.FIT_SEEDS))
    return KitEnv(ref.make(), plan, fit)


# -- the properties --------------------------------------------------------------------

def gym_api(ref: EnvRef, s: KitSettings) -> str:
    """Gymnasium's `check_env` passes with no warning (but the unaudited-env one), and every render
    mode the env declares renders."""
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
        rendered.reset(seed=seeds.draw(s.seed_base, "render", "train", 1)[0])
        with contextlib.redirect_stdout(io.StringIO()):
            out = rendered.render()
        if mode == "ansi" and not isinstance(out, str):
            _fail(f"render() in mode 'ansi' returned {type(out).__name__}, expected str")
    return "check_env passed with no warning"


def determinism(ref: EnvRef, s: KitSettings) -> str:
    """`examples` seeds (half train, half test, every other one hinted) give the same task,
    world, oracle transcript and reward in two env instances, and twice in one."""
    plan = s.plan("determinism", s.examples)
    first, second = _kit_env(ref, s, plan), _kit_env(ref, s, plan)
    for seed in plan.seeds:
        a, b = policies.fingerprint(first, seed), policies.fingerprint(second, seed)
        again = policies.fingerprint(first, seed)
        if a != b or a != again:
            _fail(f"seed {seed} ({_reset(plan, seed)}) gave different tasks, worlds or oracle transcripts")
    return f"{len(plan.seeds)} seeds reproduced in two env instances"


def _reset(plan: seeds.Plan, seed: int) -> str:
    return "hinted" if plan.hint(seed) else "unhinted"


def determinism_across_processes(ref: EnvRef, s: KitSettings) -> str:
    """The same seeds in two fresh env workers with different PYTHONHASHSEED."""
    plan = s.plan("processes", max(4, s.examples // 4))
    prints = []
    for hash_seed in ("1", "2"):
        with ref.fresh_process({"PYTHONHASHSEED": hash_seed}) as env:
            played = KitEnv(env, plan)
            prints.append({seed: policies.fingerprint(played, seed) for seed in plan.seeds})
    if prints[0] != prints[1]:
        differing = [seed for seed in plan.seeds if prints[0][seed] != prints[1][seed]]
        _fail(f"seeds {differing[:5]} differ between two processes (PYTHONHASHSEED 1 and 2): "
              f"the task depends on something other than the seed")
    return f"{len(plan.seeds)} seeds identical in two processes"


def oracle_solves(ref: EnvRef, s: KitSettings) -> str:
    """The oracle scores 1.0 on every seed, hinted and unhinted."""
    plan = s.plan("oracle", s.oracle_seeds)
    env = _kit_env(ref, s, plan)
    for seed in plan.seeds:
        reward, _, info = policies.play(env, seed, policies.oracle)
        if not reward >= ONE:
            _fail(f"the oracle scored {reward} on seed {seed} ({_reset(plan, seed)}): {info.get('verdict')}")
    return f"oracle scored 1.0 on {len(plan.seeds)} seeds"


def verifier_soundness(ref: EnvRef, s: KitSettings) -> str:
    """No single change of the oracle's write arguments (or, for an oracle that writes nothing, of
    its final reply) scores 1.0: the verifier checks what the oracle does."""
    plan = s.plan("soundness", s.soundness_seeds)
    env = _kit_env(ref, s, plan)
    tried = 0
    for seed in plan.seeds:
        for description, actions in policies.perturbed_oracles(env, seed):
            reward, _, _ = policies.play(env, seed, policies.replay(actions))
            tried += 1
            if reward >= ONE:
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

    players: Callable[..., dict[str, adversaries.Adversary]]
    """The adversaries by name, made when asked: `players(policy_seed=0)` (the degenerate
    policies draw their random actions from a stream of `policy_seed`)."""
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
    about as much as the bound allows, and telling the two apart takes more seeds; and an
    adversary that earns what doing nothing earns (a refusal's credit, 0.30 where a
    refusal is due on three seeds in five) must stay under the cap of 0.35 in each of the
    four groups of a plan (train, test, hinted, unhinted; each half the seeds) on whatever
    seeds the seed base draws: with 100 seeds a group crosses it about once in 80 draws,
    with 300 about once in 10,000."""


def _named(*names: str) -> Callable[..., dict[str, adversaries.Adversary]]:
    return lambda policy_seed=0: {name: adversaries.ADVERSARIES[name] for name in names}


def _rewarded(act: policies.Act) -> adversaries.Adversary:
    """The adversary that plays `act` for one episode: its reward."""
    return lambda env, seed: policies.play(env, seed, act)[0]


def _degenerate(policy_seed: int = 0) -> dict[str, adversaries.Adversary]:
    return {name: _rewarded(act) for name, act in policies.degenerate_policies(policy_seed).items()}


FAMILIES: dict[str, Family] = {
    "degenerate_policies": Family(_degenerate, seed_factor=3),
    "stuffed_replies": Family(_named("stuffed_prompt", "stuffed_values", "stuffed_numbers", "lookup_then_stuffed"),
                              seed_factor=3),
    "shotgun_writes": Family(_named("shotgun_writes")),
    "failing_writes": Family(_named("failing_writes", "attempt_forbidden_then_oracle")),
    "retyped_writes": Family(_named("retyped_bools", "retyped_strings", "extra_argument")),
    "early_transfer": Family(_named("early_transfer", "stuffed_then_transfer"), seed_factor=3),
    "refuse_by_kind": Family(_named("refuse_by_kind"), on_average=True, seed_factor=5),
    "candidate_answers": Family(lambda policy_seed=0: {n: pair[0] for n, pair in candidates.CANDIDATE_ADVERSARIES.items()},
                                lambda: {n: pair[1] for n, pair in candidates.CANDIDATE_ADVERSARIES.items()}),
    "choice_positions": Family(lambda policy_seed=0: dict(positions.POSITION_ADVERSARIES),
                               lambda: {n: positions.random_available for n in positions.POSITION_ADVERSARIES},
                               on_average=True, seed_factor=10),
    "guessed_facts": Family(lambda policy_seed=0: {n: guesses.GUESSED_VARIANTS[n] for n in guesses.KIT_VARIANTS},
                            on_average=True, cap=None, seed_factor=15),
}
"""Every family of adversaries the kit bounds, by the name of its property."""


def bounded(ref: EnvRef, s: KitSettings, family: Family) -> str:
    """Every adversary of `family`, on each group of seeds apart (the train seeds, the test
    seeds, the hinted resets, the unhinted resets; over those it applies to), averages at
    most its baseline's mean plus OVER_BASELINE, the baseline being the family's for it or
    else the do-nothing reply, which also caps it at the family's `cap`; and, unless the
    family is bounded on average only, it scores 1.0 on no seed where its baseline scores
    less (where the oracle's behaviour was needed). The baseline plays each seed as the
    adversary does, hinted or not. The detail ends with the smallest margin to a bound."""
    plan = s.plan("adversaries", s.adversary_seeds * family.seed_factor)
    env = _kit_env(ref, s, plan)
    nothing = dict(zip(plan.seeds, _do_nothing(ref.to_json(), plan)))
    groups = plan.groups()
    baselines = family.baselines()
    parts, margins = [], []
    for name, play in family.players(seeds.stream(s.seed_base, "policies").below(2**32)).items():
        rewards = {}
        for seed in plan.seeds:
            reward = play(env, seed)
            if reward is not None:
                rewards[seed] = reward
        if not rewards:
            parts.append(f"{name} does not apply")
            continue
        baseline = baselines.get(name)
        reference = nothing if baseline is None else {seed: baseline(env, seed) or 0.0 for seed in rewards}
        what = "doing nothing" if baseline is None else f"its baseline, {baseline.__name__}"
        for group, members in groups.items():
            played = [seed for seed in members if seed in rewards]
            if not played:
                continue
            mean = sum(rewards[seed] for seed in played) / len(played)
            base = sum(reference[seed] for seed in played) / len(played)
            cap = family.cap if baseline is None else None
            allowed = min(base + OVER_BASELINE, cap) if cap is not None else base + OVER_BASELINE
            if not mean <= allowed:
                _fail(f"the {name} adversary scored {mean:.3f} on average over {len(played)} {group} seeds "
                      f"({what}: {base:.3f}); allowed: at most {OVER_BASELINE} above it"
                      + (f" and at most {cap}" if cap is not None else ""))
            margins.append((allowed - mean, f"{name} {group}"))
        lucky = [seed for seed, r in rewards.items() if r >= ONE and not reference[seed] >= ONE]
        if lucky and not family.on_average:
            _fail(f"the {name} adversary scored 1.0 on seed {lucky[0]} ({_reset(plan, lucky[0])}), where {what} "
                  f"scores {reference[lucky[0]]} ({len(lucky)} such seeds of {len(rewards)})")
        mean = sum(rewards.values()) / len(rewards)
        base = sum(reference[seed] for seed in rewards) / len(rewards)
        parts.append(f"{name} {mean:.3f}" + (f" against {base:.3f}" if baseline is not None else "")
                     + f" ({len(rewards)} seeds)")
    do_nothing = sum(nothing.values()) / len(nothing)
    closest = f"; closest to its bound: {min(margins)[1]} by {min(margins)[0]:.3f}" if margins else ""
    return f"doing nothing {do_nothing:.3f}; " + ", ".join(parts) + closest


@functools.lru_cache(maxsize=8)
def _do_nothing(ref_json: str, plan: seeds.Plan) -> tuple[float, ...]:
    """The do-nothing reply's rewards on the plan's seeds (hinted as it says), played once
    per env and plan for the several properties that compare with it (a pure function of
    its arguments: a memo)."""
    env = KitEnv(EnvRef.from_json(ref_json).make(), plan)
    return tuple(adversaries.do_nothing(env, seed) for seed in plan.seeds)


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


POSITION_ERRORS = 4.0
"""Standard errors of a random pick's share a position rule may exceed it by, where that is
more than OVER_BASELINE: six rules on two splits are twelve comparisons, each made on a new
seed base every audit, and an honest env must not fail one by chance (at 3, over the hint
groups as well, a simulation put the precondition env, with about 100 choices a group, at
1.5 to 3% of bases)."""


def choice_positions(ref: EnvRef, s: KitSettings) -> str:
    """Every list an agent chooses from (variants, flights, payment methods, orders) is
    ordered independently of the answer: for each id the oracle's writes chose from a list
    (`trace_gym.testing.positions.oracle_choices`), each position rule (first, second,
    last, last available, ...) picks the answer, on the train and on the test seeds apart,
    at most OVER_BASELINE more often than a random available pick would (or POSITION_ERRORS
    standard errors of that share, where a split has too few choices to tell 0.05). Not by
    hint: a list and its answer come from the seed alone, so the hinted and unhinted resets
    would only split the same choices again, and every further comparison is one more
    chance for an honest env to fail on an unlucky seed base. The kit counts choices, not rewards: rewards of 0 or 1 over the
    few hundred seeds where a choice exists differ by 0.05 by chance alone, where the picks
    over all of a group's choices tell a leak from chance; `benchmarks/reward_integrity.py` plays the rules for their
    rewards, against `random_available`, on ten times the seeds."""
    family = FAMILIES["choice_positions"]
    plan = s.plan("adversaries", s.adversary_seeds * family.seed_factor)
    env = _kit_env(ref, s, plan)
    found = {seed: positions.oracle_choices(env, seed) for seed in plan.seeds}
    parts, margins = [], []
    unused = Rng.from_seed(0)  # the position rules draw nothing
    for group, members in plan.groups().items():
        choices = [c for seed in members for c in found[seed]]
        if group not in SPLITS or not choices:
            continue
        chance = sum(positions.chance_of(c) for c in choices) / len(choices)
        allowed = max(OVER_BASELINE, POSITION_ERRORS * (chance * (1 - chance) / len(choices)) ** 0.5)
        for name, rule in positions.RULES.items():
            hits = sum(rule(c.candidates, unused) == c.answer for c in choices) / len(choices)
            if hits > chance + allowed:
                _fail(f"the {name} rule picks the answer of {hits:.3f} of the {len(choices)} choices of the {group} "
                      f"seeds, a random available pick {chance:.3f}; allowed: at most {allowed:.3f} more: a list "
                      f"is ordered by its answer")
            margins.append((chance + allowed - hits, f"{name} {group}"))
            parts.append(f"{group} {name} {hits:.3f}")
        parts.append(f"{group} random {chance:.3f} ({len(choices)} choices)")
    if not parts:
        return "no write chooses an id from a list"
    return ", ".join(parts) + f"; closest to its bound: {min(margins)[1]} by {min(margins)[0]:.3f}"


def guessed_facts(ref: EnvRef, s: KitSettings) -> str:
    """A refusal learned from the oracle's, its record facts guessed from the request's kind
    and the customer's words, sent at once (`trace_gym.testing.guesses`): the facts a refusal
    must state follow from the records only, so a guess is right no more often than chance
    over the facts' range. Bounded on average, over fifteen times the adversary seeds: a
    guess right by chance on a fifth of one kind's forbidden requests earns about 0.05, and
    precondition_verification's guesses earn 0.035 to 0.04 over doing nothing, which 1000
    seeds a group (ten times) would take above 0.05 on about one seed base in a hundred,
    1500 on about one in a thousand."""
    return bounded(ref, s, FAMILIES["guessed_facts"])


def reset_leak(ref: EnvRef, s: KitSettings) -> str:
    """What the agent sees before its first tool call (each field of the reset's `info`
    and each message of the observation, hinted and unhinted) may not tell the task's
    decision: a lookup table over the exact values of each field, and of each pair of
    fields, fitted on `wording_seeds` train seeds, predicts the decision of as many test
    seeds no better than the majority class plus MAX_GAIN."""
    env = _kit_env(ref, s)
    return _decision_leak(s, lambda seeds: reset_fields(env, seeds), lookup_leak, "what the agent sees at reset")


def wording_only(ref: EnvRef, s: KitSettings) -> str:
    """The request's words alone may not tell the task's decision (`task.to_json()["decision"]`)
    better than the majority class by more than MAX_GAIN of the test tasks (every other
    reset hinted: the agent sees one or the other)."""
    train, test = _leak_seeds(s)
    env = _kit_env(ref, s, seeds.alternating(train, test))

    def tasks(seeds: list[int]) -> list[tuple[str, str]]:
        out = []
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            decision = env.task.to_json().get("decision")
            if decision is not None:
                out.append((request_text(obs), canonical_json(decision)))
        return out

    return _decision_leak(s, tasks, wording_leak, "the request's wording")


def _leak_seeds(s: KitSettings) -> tuple[list[int], list[int]]:
    """`wording_seeds` train seeds and as many test seeds, drawn from the seed base."""
    return (seeds.draw(s.seed_base, "decisions", "train", s.wording_seeds),
            seeds.draw(s.seed_base, "decisions", "test", s.wording_seeds))


def _decision_leak(s: KitSettings, collect: Callable[[list[int]], list[Any]], judge: Callable[[list, list], Any],
                   what: str) -> str:
    """Fit `judge` on what `collect` gives for `wording_seeds` train seeds, score it on as
    many test seeds: it may not beat the majority class by more than MAX_GAIN."""
    train, test = _leak_seeds(s)
    fitted = collect(train)
    scored = collect(test)
    if not fitted or not scored:
        return "no task has a decision to infer from the records"
    result = judge(fitted, scored)
    if not result.gain <= MAX_GAIN:
        _fail(f"{what} gives the decision away: {result.describe()}; allowed: at most "
              f"{MAX_GAIN:+.2f} over the majority class")
    return result.describe()


def oracle_writes_accepted(ref: EnvRef, s: KitSettings) -> str:
    """Every gold write is accepted by the world it was generated for: no write call of the
    oracle gets an 'Error: ...' answer."""
    plan = s.plan("gold", s.gold_seeds)
    env = _kit_env(ref, s, plan)
    writes = 0
    for seed in plan.seeds:
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
                    _fail(f"seed {seed} ({_reset(plan, seed)}): the oracle's {tc['function']['name']} call was rejected ({answer[:160]}): "
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
    """Fuzzed actions (Hypothesis, seeded from the seed base) on seeds of the kit's plan,
    hinted or not: nothing raises, every reward is in [0, 1], every malformed call gets an
    'Error: ...' answer."""
    env = _kit_env(ref, s)
    tool_names = list(env.action_space.toolset)
    played = s.plan("fuzz", max(2, s.examples)).seeds

    @_hypothesis(s)
    @given(st.sampled_from(played), st.booleans(), st.lists(_actions(tool_names), min_size=1, max_size=5))
    def check(seed: int, hint: bool, actions: list[Any]) -> None:
        obs, _ = env.reset(seed=seed, options={"hint": hint})
        for action in actions:
            try:
                obs, reward, terminated, truncated, _ = env.step(action)
            except (MemoryError, PropertyFailed):  # a resource limit (the caller reports it), a bad reward
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
    """Under every degenerate policy, each step's reward is 0 before the end and in [0, 1] at the
    end, with a verdict in the final info."""
    plan = s.plan("rewards", max(4, s.episodes // 4))
    env = _kit_env(ref, s, plan)
    for name, act in policies.degenerate_policies(seeds.stream(s.seed_base, "rewards policies").below(2**32)).items():
        for seed in plan.seeds:
            obs, _ = env.reset(seed=seed)
            done = False
            while not done:
                obs, reward, terminated, truncated, info = env.step(act(env, obs))
                done = terminated or truncated
                if not 0.0 <= reward <= 1.0 or (not done and reward != 0.0):
                    _fail(f"{name} on seed {seed} ({_reset(plan, seed)}): reward {reward} (rewards are 0 until "
                          f"the end, then in [0, 1])")
            if "verdict" not in info:
                _fail(f"seed {seed}: the final info has no 'verdict'")
    return "every step reward in [0, 1], 0 before the end, verdict at the end"


def no_leak(ref: EnvRef, s: KitSettings) -> str:
    """The values the agent must find (`task.hidden`) are never in the system or user
    messages, of the hinted reset or the unhinted one. A task must declare them: an env whose
    task has no `hidden` field fails (an empty list says there is nothing to hide)."""
    env = _kit_env(ref, s)
    checked = 0
    for seed in s.plan("no_leak", s.oracle_seeds).seeds:
        for hint in (False, True):
            obs, _ = env.reset(seed=seed, options={"hint": hint})
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
                    _fail(f"seed {seed} ({'hinted' if hint else 'unhinted'}): the answer {secret!r} appears in the "
                          f"system or user messages")
    return f"{checked} hidden values absent from what the agent is told, hinted and unhinted"


_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
"""Keywords whose value maps names (kept as they are) to schemas."""
_SCHEMA = frozenset({"items", "additionalProperties", "additionalItems", "not", "if", "then", "else", "contains",
                     "propertyNames", "unevaluatedProperties", "unevaluatedItems"})
"""Keywords whose value is one schema (`items` also a list of them)."""
_SCHEMA_LISTS = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
_WORDS = frozenset({"description", "title"})
"""Annotations the comparison leaves out, where a schema's value for them is a string."""


def _shape(schema: Any) -> Any:
    """A JSON Schema without the words written for people: each schema node's `description`
    and `title` whose value is a string. Property names are names (a property called
    "title" stays), and every other keyword's value is kept as it is (enums, defaults,
    required lists), so two schemas of one shape take the same arguments."""
    if not isinstance(schema, dict):
        return schema  # a boolean schema, or not a schema at all: compared as it is
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _WORDS and isinstance(value, str):
            continue
        if key in _NAMED_SCHEMAS and isinstance(value, dict):
            out[key] = {name: _shape(sub) for name, sub in value.items()}
        elif (key in _SCHEMA_LISTS or key == "items") and isinstance(value, list):
            out[key] = [_shape(sub) for sub in value]
        elif key in _SCHEMA:
            out[key] = _shape(value)
        else:
            out[key] = value
    return out


def tool_schemas(ref: EnvRef, s: KitSettings) -> str:
    """Every tool the env offers is one of the target's, with parameters of the target's
    shape: equal to one of its schemas for that name once descriptions and titles are left
    out (`_shape`; compared as canonical JSON, so `true` is not `1`). The env's schema is
    never compiled: one equal to the target's is valid, and compiling one would resolve its
    `$ref`s (a remote one is fetched) in the kit's own process."""
    plan = s.plan("tools", 10)
    env = _kit_env(ref, s, plan)
    target = s.target_schemas()
    shapes: dict[str, set[str]] = {}
    for schema in target:
        shapes.setdefault(schema["function"]["name"], set()).add(canonical_json(_shape(schema["function"]["parameters"])))
    seen = set()
    for seed in plan.seeds:
        _, info = env.reset(seed=seed)
        tools = info.get("tools")
        if not isinstance(tools, list):
            _fail(f"seed {seed}: info['tools'] is not a list of tool schemas: {str(tools)[:200]}")
        for schema in tools:
            fn = schema.get("function") if isinstance(schema, dict) and schema.get("type") == "function" else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not isinstance(
                    parameters := fn.get("parameters"), dict) or parameters.get("type") != "object":
                _fail(f"not an OpenAI function schema: {str(schema)[:200]}")
            if fn["name"] not in shapes:
                _fail(f"{fn['name']} is not one of the target's tools")
            if canonical_json(_shape(parameters)) not in shapes[fn["name"]]:
                _fail(f"{fn['name']}: parameters differ from the target's (names, types, nesting, required, or "
                      f"anything but a description or title)")
            seen.add(fn["name"])
    return f"{len(seen)} tools, each the target's own"


def tasks_differ(ref: EnvRef, s: KitSettings) -> str:
    """At least 95% of the seeds give distinct tasks."""
    plan = s.plan("distinct", s.distinct_seeds)
    env = _kit_env(ref, s, plan)
    hashes = set()
    for seed in plan.seeds:
        env.reset(seed=seed)
        hashes.add(sha256_json(env.task.to_json()))
    if len(hashes) < 0.95 * len(plan.seeds):
        _fail(f"only {len(hashes)} distinct tasks over {len(plan.seeds)} seeds (at least 95% must differ)")
    return f"{len(hashes)} distinct tasks over {len(plan.seeds)} seeds"


def splits(ref: EnvRef, s: KitSettings) -> str:
    """No task appears under a train seed and a test seed: over train and test seeds drawn
    from the seed base, and over each test seed's offset in the test split as a train seed
    (the train seed an env that reduces seeds modulo the train split's size would alias it
    to: two random draws from a billion seeds never meet by chance)."""
    train, test = SPLITS["train"], SPLITS["test"]
    if not (train.stop <= test.start or test.stop <= train.start):
        _fail("the train and test seed ranges overlap")
    n = max(20, s.episodes)
    test_seeds = seeds.draw(s.seed_base, "splits", "test", n)
    train_seeds = seeds.draw(s.seed_base, "splits", "train", n) + [train[seed - test.start] for seed in test_seeds]
    env = _kit_env(ref, s)

    def tasks(played: list[int]) -> dict[str, int]:
        out: dict[str, int] = {}
        for seed in played:
            env.reset(seed=seed)
            out.setdefault(sha256_json(env.task.to_json()), seed)
        return out

    under_train, under_test = tasks(train_seeds), tasks(test_seeds)
    common = under_train.keys() & under_test.keys()
    if common:
        first = min(common, key=under_test.__getitem__)
        _fail(f"{len(common)} task(s) appear under both train and test seeds (e.g. train seed {under_train[first]} "
              f"and test seed {under_test[first]})")
    return f"{len(train_seeds)} train and {n} test tasks, none shared"


def _coding_env(ref: EnvRef, s: KitSettings) -> KitEnv:
    """A coding env of `ref`; the property fails for an env that is not one (it offers none of
    `trace_gym.testing.coding.CODING_TOOLS`)."""
    from trace_gym.testing.coding import CODING_TOOLS

    env = _kit_env(ref, s)
    if not CODING_TOOLS & set(env.action_space.toolset):
        _fail("not a coding env (it offers none of the coding tools)")
    return env


def coding_adversaries(ref: EnvRef, s: KitSettings) -> str:
    """(Coding envs.) Deleting or skipping tests, writing where hidden tests could go, making the
    test process exit 0 or forging its results, special-casing the issue's snippet, and the
    reproduction and localization envs' own adversaries (`trace_gym.testing.coding`) score 0
    on every seed of the plan; a bounded heuristic stays within its bound."""
    from trace_gym.testing.coding import HEURISTIC_SEEDS, adversaries_score_nothing

    env = _coding_env(ref, s)
    try:
        return adversaries_score_nothing(env, s.plan("coding adversaries", max(4, s.examples // 2)).seeds,
                                         s.plan("coding heuristics", HEURISTIC_SEEDS).seeds)
    except AssertionError as exc:
        _fail(str(exc))
        raise


def coding_tasks_not_vacuous(ref: EnvRef, s: KitSettings) -> str:
    """(Coding envs.) Every hidden FAIL_TO_PASS test fails on the unfixed package, and every hidden
    test passes on the fixed one, run in the sandbox as the verifier runs them."""
    from trace_gym.testing.coding import f2p_not_vacuous

    env = _coding_env(ref, s)
    try:
        return f2p_not_vacuous(env, s.plan("coding vacuous", max(4, s.examples // 2)).seeds)
    except AssertionError as exc:
        _fail(str(exc))
        raise


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
    "coding_adversaries": coding_adversaries,
    "coding_tasks_not_vacuous": coding_tasks_not_vacuous,
}
"""Every property, by name."""
CODING_PROPERTIES = ("gym_api", "determinism", "determinism_across_processes", "oracle_solves", "rewards_in_range",
                     "malformed_actions", "no_leak", "tasks_differ", "splits", "coding_adversaries",
                     "coding_tasks_not_vacuous")
"""The properties a coding env is checked with (the tau2-shaped ones, of writes, refusals and
a customer's wording, do not apply to a repository)."""
CUSTOMER_SERVICE_PROPERTIES = tuple(n for n in PROPERTIES if not n.startswith("coding_"))
"""The properties a customer-service env is checked with."""
