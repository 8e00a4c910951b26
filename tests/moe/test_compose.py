"""`trace-gym compose` and the composed policies, as a user runs them: gate data from
trajectory files, the mixture and the router written, then each played by `trace-gym eval`."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from trace_gym.cli import main

FIXTURE = REPO / "tests" / "fixtures" / "tiny_agent"
CONFIG = REPO / "configs" / "embedded.toml"
ENVS = ("trace/precondition_verification-v0", "trace/tool_calling_precision-v0")


@pytest.fixture(scope="module")
def composed(tmp_path_factory):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("compose")
    adapters = []
    for i in range(2):
        torch.manual_seed(i)
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(FIXTURE), LoraConfig(
            r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False))
        model.save_pretrained(root / f"adapter{i}")
        adapters.append(str(root / f"adapter{i}"))
    files = []
    for env_id in ENVS:  # successful trajectories: the oracle's, as a trained adapter's would be
        out = root / f"{env_id.split('/')[1]}.jsonl"
        assert main(["rollout", env_id, "--policy", "oracle", "--seeds", "0:6", "--out", str(out), "--quiet",
                     "--workers", "1", "--config", str(CONFIG)]) == 0
        files.append(str(out))
    assert main(["compose", "--adapters", ",".join(adapters), "--envs", ",".join(ENVS), "--base", str(FIXTURE),
                 "--out", str(root / "out"), "--trajectories", *files, "--threads", "1", "--quiet",
                 "--config", str(CONFIG)]) == 0
    return root / "out"


def test_compose_writes_the_mixture_the_router_and_the_diagnostics(composed):
    report = json.loads((composed / "routing.json").read_text())
    assert set(report["accuracy"]) == {"precondition_verification", "tool_calling_precision"}
    assert all(0.0 <= a <= 1.0 for a in report["accuracy"].values())
    assert len(report["load"]) == 2 and report["losses"]["last"]["label"] < report["losses"]["first"]["label"]
    info = json.loads((composed / "mixture" / "mixture.json").read_text())
    assert info["experts"] == ["base", "precondition_verification", "tool_calling_precision"]
    router = json.loads((composed / "router.json").read_text())
    assert list(router["adapters"]) == ["precondition_verification", "tool_calling_precision"]
    assert (composed / "routing.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("policy", ["mixture", "router"])
def test_composed_policies_play_through_eval(composed, policy, capsys, tmp_path):
    out = tmp_path / "eval.jsonl"
    assert main(["eval", ENVS[0], "--policy", policy, "--compose-dir", str(composed), "--model-path", str(FIXTURE),
                 "--seeds", "0:2", "--max-new-tokens", "8", "--out", str(out), "--json", "--quiet",
                 "--config", str(CONFIG)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2 and records[0]["policy"].startswith(policy)
    assert records[0]["run"]["policy"]["name"] == policy


def test_the_router_decides_once_per_conversation_from_its_first_user_message(composed):
    from trace_gym.moe.policy import RouterPolicy

    router = json.loads((composed / "router.json").read_text())
    policy = RouterPolicy(FIXTURE, router["adapters"], max_new_tokens=4)
    opening = [{"role": "system", "content": "s"}, {"role": "user", "content": "Please cancel my order."}]
    first = policy.route(opening)
    assert first in ("base", *router["adapters"])
    later = opening + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "Now change my address."}]
    assert policy.route(later) == first and len(policy.decisions) == 1
    probs = policy.router.probabilities(opening)
    assert len(probs) == 3 and abs(sum(probs) - 1) < 1e-5
    # two sampling seeds play different episodes: their runs must not share a fingerprint
    reseeded = RouterPolicy(FIXTURE, router["adapters"], max_new_tokens=4, seed=7)
    assert reseeded.fingerprint()["seed"] == 7 != policy.fingerprint()["seed"]


def test_the_router_on_a_server_asks_for_one_letter_of_the_options():
    from openai import OpenAI

    from tests.agents.fake_server import FakeServer
    from trace_gym.errors import TraceGymError
    from trace_gym.moe.router import choose_on_server, options

    opts = options(["precondition_verification", "tool_calling_precision"])
    answers = iter(["C", "Z"])
    with FakeServer(lambda body: ("ok", {"content": next(answers)})) as server:
        client = OpenAI(base_url=server.url, api_key="x", max_retries=0)
        conversation = [{"role": "user", "content": "Cancel my order please."}]
        assert choose_on_server(client, "base", opts, conversation) == 2
        with pytest.raises(TraceGymError, match="not one of"):
            choose_on_server(client, "base", opts, conversation)
    body = server.requests[0]
    assert body["max_tokens"] == 1 and body["structured_outputs"] == {"choice": ["A", "B", "C"]}
    assert "B. precondition_verification" in body["messages"][0]["content"]


def test_the_weighted_merge_adds_each_adapters_delta_by_its_weight(composed):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from trace_gym.moe.router import merge_weighted

    router = json.loads((composed / "router.json").read_text())
    (a, path_a), (b, path_b) = router["adapters"].items()
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(FIXTURE), path_a, adapter_name=a)
    model.load_adapter(path_b, adapter_name=b)

    def delta(name):
        layer = model.base_model.model.model.layers[0].self_attn.q_proj
        return (layer.lora_B[name].weight @ layer.lora_A[name].weight) * layer.scaling[name]

    merged = merge_weighted(model, [a, b], [0.3, 0.7])
    assert torch.allclose(delta(merged), 0.3 * delta(a) + 0.7 * delta(b), atol=1e-6)
