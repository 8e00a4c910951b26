"""Continuous batching changes no episode: on the committed fixture in float64, the local
policy plays the same transcripts with 1, 3 and 8 episodes in flight (greedy, and sampled
with the same per-episode seeds), on episodes of different lengths whose turns end at
different steps, and under the static schedule that came before."""

from __future__ import annotations

import pytest

from tests.conftest import REPO

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import gymnasium as gym

from trace_gym.driver import EpisodeRequest, play

FIXTURE = REPO / "tests" / "fixtures" / "tiny_agent"


class Chat(gym.Env):
    """A conversation of `seed % 4 + 1` agent turns whose answers differ in length by seed
    and turn; reward 1 when the agent's last turn is longer than its first."""

    def reset(self, *, seed=None, options=None):
        self.seed_, self.turn = seed, 0
        self.first = None
        self.messages = [{"role": "system", "content": "You help customers."},
                         {"role": "user", "content": f"Customer {seed}: " + "please help " * (seed % 5 + 1)}]
        return list(self.messages), {"tools": [], "system_prompt_unhinted": "You help customers."}

    def step(self, action):
        self.turn += 1
        self.first = self.first if self.first is not None else len(action)
        self.messages.append({"role": "assistant", "content": action})
        done = self.turn >= self.seed_ % 4 + 1
        if not done:
            self.messages.append({"role": "user", "content": "and more " * ((self.seed_ + self.turn) % 6 + 1)})
        reward = float(done and len(action) > self.first)
        return list(self.messages), reward, done, False, {"termination_reason": "done" if done else None}


@pytest.fixture(scope="module")
def model_and_tokenizer():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(FIXTURE)
    model = AutoModelForCausalLM.from_pretrained(FIXTURE, dtype=torch.float64).eval()
    with torch.no_grad():  # the fixture writes the same tokens after any prompt: perturb it so rows differ
        g = torch.Generator().manual_seed(0)
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.02)
    return model, tokenizer


def _transcripts(model, tokenizer, temperature, in_flight, static=False):
    from trace_gym.agents.local import LocalModelPolicy

    policy = LocalModelPolicy.from_model(model, tokenizer, name="fixture", temperature=temperature,
                                         max_new_tokens=6, seed=5)
    policy.engine.stop_ids |= {227, 8}  # tokens the perturbed fixture writes often: turns end at different steps
    policy.lockstep = static
    episodes = [EpisodeRequest(seed, sample, sampling_seed=100 * seed + sample)
                for seed in range(5) for sample in range(2)]
    played = play(episodes, policy, make_env=lambda _: Chat(), env_id="chat", in_flight=in_flight, static=static)
    return {(p.episode.seed, p.episode.sample): ([t.completion_ids for t in p.turns], p.messages) for p in played}


@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "sampled"])
def test_transcripts_do_not_depend_on_what_else_is_in_flight(model_and_tokenizer, temperature):
    model, tokenizer = model_and_tokenizer
    one = _transcripts(model, tokenizer, temperature, 1)
    turns = [len(t) for t, _ in one.values()]
    assert min(turns) == 1 and max(turns) == 4  # episodes of different lengths
    lengths = {len(ids) for t, _ in one.values() for ids in t}
    assert len(lengths) > 1  # turns that end at different steps
    if temperature:
        assert one[(0, 0)][0] != one[(0, 1)][0]  # the two samples of a seed draw apart
    for in_flight in (3, 8):
        assert _transcripts(model, tokenizer, temperature, in_flight) == one, in_flight
    assert _transcripts(model, tokenizer, temperature, 8, static=True) == one
