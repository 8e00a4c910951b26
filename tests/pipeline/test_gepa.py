"""The GEPA baseline: a candidate's instructions reach the agent's system prompt, the
reflection model reads each transcript and what its verdict failed, and GEPA keeps the
instructions that score best on the validation seeds."""

from __future__ import annotations

import pytest

pytest.importorskip("gepa")

from tests.agents.fake_server import FakeServer  # noqa: E402
from trace_gym.agents.base import OraclePolicy  # noqa: E402
from trace_gym.pipeline.gepa import endpoint_lm, optimize_instructions  # noqa: E402

KNOBS = {"prompt_style": "compact", "max_requests": 1}
PROPOSAL = "```\nSay MAGIC, then follow the policy.\n```"


class Obedient:
    """Plays like the oracle only when its system prompt holds MAGIC; else it gives up."""

    name = "obedient"

    def __init__(self) -> None:
        self.oracle = OraclePolicy()

    def bind(self, env, seed=0, sample=0):
        self.oracle.bind(env, seed, sample)

    def act(self, messages, tools):
        if "MAGIC" in messages[0]["content"]:
            return self.oracle.act(messages, tools)
        return "Sorry, I cannot help with that. Goodbye."


def test_gepa_keeps_the_instructions_that_make_the_agent_pass(tmp_path):
    prompts = []

    def reflect(prompt):
        prompts.append(prompt if isinstance(prompt, str) else str(prompt))
        return PROPOSAL

    result = optimize_instructions("trace/airline-v0", KNOBS, Obedient, reflect, train_seeds=[1, 2, 3, 4],
                                   val_seeds=[5, 6, 7], max_metric_calls=24, run_dir=tmp_path / "gepa")
    assert result["seed_val_score"] == 0.0  # the base: no instructions, nothing passes
    assert result["instructions"] == "Say MAGIC, then follow the policy." and result["val_score"] == 1.0
    assert prompts and "Sorry, I cannot help" in prompts[0] and "failed checks" in prompts[0]
    assert (tmp_path / "gepa" / "result.json").is_file()


def test_the_reflection_model_can_be_an_endpoint():
    with FakeServer(lambda body: ("ok", {"content": PROPOSAL})) as server:
        result = optimize_instructions("trace/retail-v0", KNOBS, Obedient, endpoint_lm(server.url, "reflector"),
                                       train_seeds=[1, 2], val_seeds=[3, 4], max_metric_calls=12)
    assert result["val_score"] == 1.0 and server.requests
    assert server.requests[0]["model"] == "reflector"
    assert "failed checks" in server.requests[0]["messages"][0]["content"]
