"""The episode driver: play these episodes with this policy. The one loop that resets envs,
asks the policy for each turn, steps the env and records the episode.

`play(episodes, policy)` keeps up to `in_flight` episodes live at once and yields each one
(`PlayedEpisode`) as soon as it ends, so a caller that appends every trajectory as it comes loses
at most the episodes in flight to a crash. A new episode takes a free place at once; an env
is reused for the next episode once its own has ended.

Policies come in two shapes:

- **Turn-by-turn** (`trace_gym.agents.base.Policy`: `bind(env, seed, sample)` then
  `act(messages, tools)`): oracle, random, endpoint, any user function. `Stepwise` runs one
  instance per live episode (made by a factory), on the driver's thread or, for policies
  that wait on a server, in a thread pool.
- **Batched** (`BatchedPolicy`: `submit(live)` a turn to produce, `collect()` the turns that
  are ready, `release(live)` an episode that ended): a local model's continuous batch, an
  OpenVINO pipeline, a pool of vLLM requests. `collect` returns at least one turn while any
  is submitted; the driver steps those episodes' envs and submits their next turns, so a
  batched policy never waits for its slowest episode.

Failures: an env that raises (in reset or step) ends its episode with an error record
(`PlayedEpisode.error`, reward 0) and the others go on; a policy that raises stops the run with its
own exception.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from trace_gym.deprecation import renamed
from trace_gym.errors import InvalidConfig, PolicyError
from trace_gym.messages import Message
from trace_gym.seeding import split_of


@dataclass(frozen=True)
class EpisodeRequest:
    """One episode to play: what `play` is asked for (an env's own state of an episode is
    `trace_gym.env.EpisodeState`)."""

    seed: int
    """The env seed."""
    sample: int = 0
    """Index of this episode among those played on the same seed (a GRPO group's rollouts)."""
    hint: bool = False
    """Reset with the hint in the system prompt (`options={"hint": True}`)."""
    sampling_seed: int | None = None
    """Seeds the policy's token sampling; None derives it from (seed, sample)."""
    env_id: str | None = None
    """The env; None plays the driver's `env_id`."""
    options: Mapping[str, Any] | None = None
    """More reset options."""

    def reset_options(self) -> dict[str, Any] | None:
        """The options to reset the env with: `options`, plus `hint` when set; None when
        there are none."""
        options = dict(self.options or {})
        if self.hint:
            options["hint"] = True
        return options or None

    def stream(self) -> int:
        """The seed of the episode's sampling stream."""
        if self.sampling_seed is not None:
            return self.sampling_seed % 2**63
        return (self.seed * 7919 + self.sample) % 2**31


@dataclass
class Turn:
    """The tokens of one agent turn, when the policy generated them itself: what a
    policy-gradient loss needs."""

    prompt_ids: list[int]
    """The prompt the model completed (with the hint, when the episode had one)."""
    loss_prompt_ids: list[int]
    """The same conversation with the hint-free system prompt: what the loss conditions on."""
    completion_ids: list[int]
    """The sampled tokens, the stop token included when one ended the turn."""
    logprobs: list[float]
    """Per sampled token, its log-probability under the sampler (at the rollout temperature)."""


@dataclass
class Reply:
    """A policy's turn: the action the env steps with, and its tokens when it has them."""

    action: Any
    """A text, a tool-call dict or an assistant message."""
    turn: Turn | None = None


@dataclass(eq=False)
class Live:
    """An episode in flight, as a policy sees it."""

    key: int
    """Unique within one `play` call."""
    episode: EpisodeRequest
    env_id: str
    env: Any
    messages: list[Message]
    """The conversation so far (the env's last observation)."""
    tools: list[dict[str, Any]]
    system_prompt_unhinted: str | None
    turn: int = 0
    """Index of the turn the policy is asked for."""
    turns: list[Turn] = field(default_factory=list)
    started: float = 0.0
    reset_s: float = 0.0


@runtime_checkable
class BatchedPolicy(Protocol):
    """A policy that produces many episodes' turns together: `submit` a turn to produce,
    `collect` the turns that are ready, `release` an episode that ended."""

    name: str

    def submit(self, live: Live) -> None:
        """The episode wants its next turn (from `live.messages` and `live.tools`)."""

    def collect(self) -> list[tuple[Live, Reply]]:
        """Advance, and return the turns that are ready: at least one while any is submitted."""

    def release(self, live: Live) -> None:
        """The episode ended: drop what is kept for it."""


@dataclass
class PlayedEpisode:
    """A finished episode, as `play` yields it: the request, the reward, the conversation and
    the policy's tokens."""

    episode: EpisodeRequest
    env_id: str
    reward: float
    info: dict[str, Any]
    messages: list[Message]
    turns: list[Turn]
    policy: str
    timings: dict[str, float]
    error: str | None = None
    """Why the env failed, when it did (the episode then scores 0)."""
    task: dict[str, Any] = field(default_factory=dict)
    """The task's kind, capabilities_needed and instructions; env_sha256."""
    engine: dict[str, Any] = field(default_factory=dict)
    """How the policy ran, when it says (a local model's dtype, threads, CPU flags)."""

    @property
    def request(self) -> EpisodeRequest:
        """The episode as it was asked for (the same as `episode`)."""
        return self.episode

    @property
    def seed(self) -> int:
        """The env seed."""
        return self.episode.seed

    @property
    def passed(self) -> bool:
        """True when the reward is 1 (within 1e-9)."""
        return self.reward >= 1.0 - 1e-9

    @property
    def termination_reason(self) -> str | None:
        """Why the episode ended: "error" when the env failed, else the env's own reason."""
        return "error" if self.error else self.info.get("termination_reason")

    @property
    def checks(self) -> dict[str, float]:
        """Credit of each of the verdict's checks (1.0 / 0.0 for a check without partial credit)."""
        out: dict[str, float] = {}
        for check in (self.info.get("verdict") or {}).get("checks", []):
            credit = check.get("credit")
            out[check["name"]] = float(credit if credit is not None else check.get("passed", False))
        return out

    @property
    def check_passes(self) -> dict[str, bool]:
        """Whether each of the verdict's checks passed (a check's credit may be partial, or 0
        by design, while it passes)."""
        return {c["name"]: bool(c.get("passed", False)) for c in (self.info.get("verdict") or {}).get("checks", [])}

    def record(self) -> dict[str, Any]:
        """The episode's trajectory record (`trace_gym.trajectory`)."""
        from trace_gym.trajectory import SCHEMA_VERSION

        e = self.episode
        record = {
            "schema_version": SCHEMA_VERSION,
            "id": episode_id(self.env_id, e.seed, e.sample),
            "env_id": self.env_id,
            "env_sha256": self.task.get("env_sha256"),
            "seed": e.seed,
            "sample": e.sample,
            "split": split_of(e.seed),
            "policy": self.policy,
            "hint": e.hint,
            "messages": self.messages,
            "reward": float(self.reward),
            "passed": self.passed,
            "verdict": self.info.get("verdict"),
            "task_kind": self.task.get("kind"),
            "capabilities_needed": list(self.task.get("capabilities_needed") or []),
            "termination_reason": self.termination_reason,
            "instructions": self.task.get("instructions"),
            "timings": self.timings,
        }
        if self.error:
            record["error"] = self.error
        if self.engine:
            record["engine"] = self.engine
        return record


def episode_id(env_id: str, seed: int, sample: int) -> str:
    """A trajectory record's id: `env/split/seed/sample`."""
    return f"{env_id}/{split_of(seed)}/{seed}/{sample}"


# -- turn-by-turn policies ------------------------------------------------------------------

class Stepwise:
    """A batched policy over turn-by-turn ones: one instance per live episode (from
    `factory`, reused for later episodes), bound at the episode's first turn. `threads` > 0
    runs the turns in a pool of that many threads (for policies that wait on a server);
    otherwise on the caller's thread, one at a time."""

    def __init__(self, factory: Callable[[], Any], *, threads: int = 0, first: Any = None) -> None:
        self.factory = factory
        self.free: list[Any] = [first] if first is not None else []
        self.bound: dict[int, Any] = {}
        self.queue: list[Live] = []
        self.pool = ThreadPoolExecutor(threads) if threads > 0 else None
        self.pending: dict[Future, Live] = {}
        self.name = getattr(first if first is not None else self._instance(), "name", "policy")

    def _instance(self) -> Any:
        if not self.free:
            self.free.append(self.factory())
        return self.free[-1]

    def _policy(self, live: Live) -> Any:
        policy = self.bound.get(live.key)
        if policy is None:
            self._instance()
            policy = self.bound[live.key] = self.free.pop()
            policy.bind(live.env, live.episode.seed, live.episode.sample)
        return policy

    def _act(self, policy: Any, live: Live) -> Reply:
        action = policy.act(live.messages, live.tools)
        return action if isinstance(action, Reply) else Reply(action)

    def submit(self, live: Live) -> None:
        """Bind a policy instance to the episode if it has none, and queue its turn (or
        start it in the pool)."""
        policy = self._policy(live)
        if self.pool is None:
            self.queue.append(live)
        else:
            self.pending[self.pool.submit(self._act, policy, live)] = live

    def collect(self) -> list[tuple[Live, Reply]]:
        """The turns that are ready: every queued one without a pool, else at least one of
        those running (none when nothing is submitted)."""
        if self.pool is None:
            ready, self.queue = self.queue, []
            return [(live, self._act(self.bound[live.key], live)) for live in ready]
        if not self.pending:
            return []
        done, _ = wait(list(self.pending), return_when=FIRST_COMPLETED)
        return [(self.pending.pop(f), f.result()) for f in done]

    def release(self, live: Live) -> None:
        """Return the episode's policy instance to the free list, for a later episode."""
        policy = self.bound.pop(live.key, None)
        if policy is not None:
            self.free.append(policy)

    def close(self) -> None:
        """Cancel the turns not yet started and shut the thread pool down."""
        if self.pool is not None:
            for future in self.pending:
                future.cancel()
            self.pool.shutdown(wait=True, cancel_futures=True)


def batched(policy: Any, *, threads: int = 0) -> BatchedPolicy:
    """`policy` as a batched policy: a batched one as it is; a turn-by-turn instance (one
    episode at a time) or a zero-argument factory of them (one instance per live episode)."""
    if isinstance(policy, BatchedPolicy) and not isinstance(policy, type):
        return policy
    if hasattr(policy, "act") and not isinstance(policy, type):
        return _Single(policy, threads)
    if callable(policy):
        made = policy()
        if isinstance(made, BatchedPolicy):
            return made
        return Stepwise(policy, threads=threads, first=made)
    raise InvalidConfig(f"{policy!r} is not a policy: it needs act(messages, tools) or submit/collect/release")


class _Single(Stepwise):
    """One turn-by-turn instance: its episodes are played one at a time."""

    def __init__(self, policy: Any, threads: int) -> None:
        def refuse() -> Any:
            raise InvalidConfig(f"policy {getattr(policy, 'name', policy)!r} is one instance: it plays one episode "
                                "at a time (give a factory to play several at once)")

        super().__init__(refuse, threads=threads, first=policy)
        self.capacity = 1


# -- the driver -----------------------------------------------------------------------------

def make_env(env_id: str, **kwargs: Any) -> Any:
    """A trace-gym env (a generated one in its sandboxed worker), or an env the user registered
    with gymnasium themselves that follows the same contract."""
    import gymnasium as gym

    from trace_gym.registry import make, registered_elsewhere

    if registered_elsewhere(env_id):
        return gym.make(env_id, **kwargs)
    return make(env_id, **kwargs)


def _default_make_env(env_id: str, env_kwargs: Mapping[str, Any]) -> Any:
    return make_env(env_id, **env_kwargs)


def _task_facts(env: Any) -> dict[str, Any]:
    base = getattr(env, "unwrapped", env)
    task = getattr(base, "task", None)
    sha = getattr(base, "code_sha256", None)
    return {"kind": getattr(task, "kind", None),
            "capabilities_needed": list(getattr(task, "capabilities_needed", None) or []),
            "instructions": getattr(task, "instructions", None),
            "env_sha256": sha() if callable(sha) else None}


def _failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:500]}"


def play(episodes: Iterable[EpisodeRequest], policy: Any, *, env_id: str | None = None,
         env_kwargs: Mapping[str, Any] | None = None, in_flight: int = 1,
         make_env: Callable[[str], Any] | None = None, threads: int = 0,
         static: bool = False) -> Iterator[PlayedEpisode]:
    """Play `episodes` with `policy` (batched, a turn-by-turn instance, or a factory of
    them), `in_flight` at a time, yielding each as soon as it ends (not in order).
    `static` starts new episodes only when every episode in flight has ended (batches of
    `in_flight`: the schedule before continuous batching, kept for comparison).

    Envs come from `make_env(env_id)` (default: the registry's, with `env_kwargs`) and are
    reused from one episode to the next; an env that failed is closed and replaced."""
    if not (type(in_flight) is int and in_flight >= 1):
        raise InvalidConfig(f"in_flight={in_flight!r} is invalid: must be an integer >= 1")
    kwargs = dict(env_kwargs or {})
    new_env = make_env or (lambda name: _default_make_env(name, kwargs))
    agent = batched(policy, threads=threads)
    capacity = min(in_flight, getattr(agent, "capacity", in_flight))
    queue = iter(episodes)
    free_envs: dict[str, list[Any]] = {}
    live: dict[int, Live] = {}
    keys = iter(range(1 << 62))
    name = getattr(agent, "name", "policy")
    described = getattr(agent, "metadata", None)
    engine = described() if callable(described) else {}
    exhausted = False

    def finish(slot: Live, reward: float, info: dict[str, Any], error: str | None = None) -> PlayedEpisode:
        agent.release(slot)
        del live[slot.key]
        total = time.perf_counter() - slot.started
        facts = _task_facts(slot.env) if error is None else {}
        if error is None:
            free_envs.setdefault(slot.env_id, []).append(slot.env)
        else:
            _close(slot.env)
        return PlayedEpisode(slot.episode, slot.env_id, reward, info, slot.messages, slot.turns, name,
                      {"reset_s": round(slot.reset_s, 6), "steps_s": round(total - slot.reset_s, 6),
                       "total_s": round(total, 6)}, error, facts, engine)

    def start(episode: EpisodeRequest) -> PlayedEpisode | None:
        which = episode.env_id or env_id
        if which is None:
            raise InvalidConfig("an episode names no env and the driver was given no env_id")
        env = free_envs.get(which, []).pop() if free_envs.get(which) else new_env(which)
        slot = Live(next(keys), episode, which, env, [], [], None, started=time.perf_counter())
        live[slot.key] = slot
        try:
            obs, info = env.reset(seed=episode.seed, options=episode.reset_options())
        except Exception as exc:  # noqa: BLE001 - the env failed: this episode ends, the others go on
            return finish(slot, 0.0, {}, _failure(exc))
        slot.messages, slot.tools = obs, info.get("tools") or []
        slot.system_prompt_unhinted = info.get("system_prompt_unhinted")
        slot.reset_s = time.perf_counter() - slot.started
        agent.submit(slot)
        return None

    try:
        while True:
            admit = not static or not live  # a static batch refills only once it has emptied
            while admit and not exhausted and len(live) < capacity:
                episode = next(queue, None)
                if episode is None:
                    exhausted = True
                    break
                ended = start(episode)
                if ended is not None:
                    yield ended
            if not live:
                return
            ready = agent.collect()
            if not ready:
                raise PolicyError(f"policy {name!r} returned no turn while {len(live)} episode(s) wait for one")
            for slot, reply in ready:
                if reply.turn is not None:
                    slot.turns.append(reply.turn)
                try:
                    obs, reward, terminated, truncated, info = slot.env.step(reply.action)
                except Exception as exc:  # noqa: BLE001 - the env failed: its episode ends, the others go on
                    yield finish(slot, 0.0, {}, _failure(exc))
                    continue
                slot.messages = obs
                if terminated or truncated:
                    yield finish(slot, float(reward), info)
                else:
                    slot.turn += 1
                    agent.submit(slot)
    finally:
        for slot in list(live.values()):
            agent.release(slot)
            _close(slot.env)
        for envs in free_envs.values():
            for env in envs:
                _close(env)
        close = getattr(agent, "close", None)
        if close is not None and agent is not policy:
            close()


def _close(env: Any) -> None:
    try:
        env.close()
    except Exception:  # noqa: BLE001, S110 - closing a failed env must not hide why it failed
        pass


class borrowed:
    """An env lent to the driver: everything but `close`, which stays with its owner (so that
    one env serves every episode, and the caller closes it)."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def close(self) -> None:
        """Does nothing: the env's owner closes it."""


def play_in_order(episodes: Sequence[EpisodeRequest], policy: Any, **kwargs: Any) -> list[PlayedEpisode]:
    """`play` every episode (keyword arguments as `play`'s) and return them all, in the order
    given; equal episodes each come back as their own (the driver hands back the object it
    was given, so each is copied first)."""
    copies = [replace(e) for e in episodes]
    where = {id(e): n for n, e in enumerate(copies)}
    out: list[PlayedEpisode | None] = [None] * len(copies)
    for played in play(copies, policy, **kwargs):
        out[where[id(played.episode)]] = played
    return out  # type: ignore[return-value]


def play_one(env: Any, policy: Any, *, env_id: str, seed: int, sample: int = 0, hint: bool = False) -> PlayedEpisode:
    """One episode in a given env (the env stays open)."""
    (played,) = play([EpisodeRequest(seed, sample, hint, env_id=env_id)], policy, make_env=lambda _: borrowed(env))
    return played


# `Episode` was also the env's name for its state of an episode: the old names still work, warning.
__getattr__ = renamed(__name__, {"Episode": "EpisodeRequest", "Played": "PlayedEpisode"})
