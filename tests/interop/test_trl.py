"""trace-gym envs in other trainers: TRL's GRPOTrainer through a dataset with one row per seed
and a multi-turn rollout_func, and the plain route (play with any generate function, score a
replay)."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from tests.conftest import REPO
from trace_gym.interop import episode_sequence, play, score

FIXTURE = REPO / "tests" / "fixtures" / "tiny_agent"


def test_play_with_any_generate_function_and_score_its_replay():
    import gymnasium as gym

    env_id = "trace/multi_step_task_completion-v0"
    oracle = gym.make(env_id)
    opening, _ = oracle.reset(seed=4)
    record = play(env_id, 4, lambda messages, tools: oracle.unwrapped.oracle_action(messages))
    assert record["reward"] == 1.0 and record["seed"] == 4
    turns = [m for m in record["messages"][len(opening):] if m["role"] == "assistant"]
    assert len(turns) >= 2
    assert score(env_id, 4, turns) == 1.0
    assert score(env_id, 4, turns[:-1]) == 0.0  # the episode is not over yet
    assert score(env_id, 4, ["I cannot help with that."]) < 1.0


def test_an_episode_becomes_one_sequence_with_the_env_tokens_masked():
    from trace_gym.agents.episodes import Turn

    turns = [Turn([1, 2, 3], [1, 2, 3], [10, 11], [-0.1, -0.2]),
             Turn([1, 2, 3, 10, 11, 20, 21], [1, 2, 3, 10, 11, 20, 21], [12], [-0.3])]
    prompt, completion, logp, mask = episode_sequence(turns)
    assert prompt == [1, 2, 3] and completion == [10, 11, 20, 21, 12]
    assert mask == [1, 1, 0, 0, 1] and logp == [-0.1, -0.2, 0.0, 0.0, -0.3]
    # a template that re-renders the first completion differently: the sequence follows the
    # prompt the model saw, and the re-rendered tokens lose their mask
    turns[1] = Turn([1, 2, 3, 10, 19, 20], [1, 2, 3, 10, 19, 20], [12], [-0.3])
    prompt, completion, logp, mask = episode_sequence(turns)
    assert completion == [10, 19, 20, 12] and mask == [1, 0, 0, 1] and logp == [-0.1, 0.0, 0.0, -0.3]


def test_a_dataset_row_per_seed():
    pytest.importorskip("datasets")
    from trace_gym.interop import trl_dataset

    ds = trl_dataset("trace/precondition_verification-v0", [5, 9], prompt_style="compact")
    assert ds["seed"] == [5, 9] and len(ds) == 2
    row = json.loads(ds["prompt"][0])
    assert row["seed"] == 5 and row["messages"][0]["role"] == "system"


def _trl(monkeypatch):
    """torch, set for a TRL run on one thread with a fixed seed (TRL's experimental notice off)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    return torch


@pytest.mark.slow
def test_a_two_step_trl_grpo_run_on_a_trace_env(tmp_path, monkeypatch):
    torch = _trl(monkeypatch)
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from tests.trainer.learnable_env import register
    from trace_gym.interop import TRLRollouts, trace_reward, trl_dataset

    env_id = register()
    tokenizer = AutoTokenizer.from_pretrained(FIXTURE)
    model = AutoModelForCausalLM.from_pretrained(FIXTURE, dtype=torch.float32)
    rollouts = TRLRollouts(env_id, tokenizer, max_new_tokens=12)
    groups = []

    def rollout_func(prompts, trainer):
        out = rollouts(prompts, trainer)
        seeds = [json.loads(p)["seed"] for p in prompts]
        groups.append([seeds[i:i + 4] for i in range(0, len(seeds), 4)])
        return out

    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=4, max_steps=2,
                      max_completion_length=256, report_to="none", use_cpu=True, save_strategy="no",
                      learning_rate=1e-2, bf16=False, logging_steps=1)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=trace_reward,
                          train_dataset=trl_dataset(env_id, range(16)), rollout_func=rollout_func, args=args,
                          peft_config=LoraConfig(r=4, lora_alpha=4, target_modules=["q_proj", "v_proj"]))
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_B" in n}
    trainer.train()
    assert len(groups) == 2
    assert all(len(set(group)) == 1 for batch in groups for group in batch)  # a group shares its seed
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2 and any(h["reward_std"] > 0 for h in logs)
    moved = [n for n, p in trainer.model.named_parameters() if n in before and not torch.equal(p, before[n])]
    assert moved


def _readme_trl_block() -> str:
    """The TRL block of the README's "Use with your trainer" section."""
    from tests.interop.readme import block

    return block("TRL")


def test_the_readmes_trl_example_runs_as_written(tmp_path, monkeypatch):
    """The README's block itself, on the committed fixture: only the model path, the output
    directory, the step count and the machine's flags are replaced (each replacement must
    find its text, so an edited README fails here until this follows it)."""
    _trl(monkeypatch)
    code = _readme_trl_block()
    for old, new in (('"path/to/model"', repr(str(FIXTURE))), ('output_dir="runs/trl"', f'output_dir={str(tmp_path)!r}'),
                     ("max_steps=20)", "max_steps=1, max_completion_length=256, use_cpu=True, report_to='none', "
                                       "save_strategy='no', bf16=False)")):
        assert code.count(old) == 1, f"the README's TRL example no longer has {old}"
        code = code.replace(old, new)
    namespace: dict = {}
    exec(compile(code, "README.md (Use with your trainer)", "exec"), namespace)
    trainer = namespace["trainer"]
    assert trainer.state.global_step == 1
    assert namespace["env_id"] == "trace/precondition_verification-v0"
    rewards = [h for h in trainer.state.log_history if "reward" in h]
    assert rewards and 0.0 <= rewards[0]["reward"] <= 1.0


class _VLLMGeneration:
    """A stand-in for TRL's `VLLMGeneration` (whose signature it copies, checked below): every
    prompt's completion is a fixed reply and the stop token, each token at log-probability
    -0.25, with its top-2 after it as vLLM gives them."""

    def __init__(self, tokenizer, reply: str) -> None:
        self.ids = tokenizer.encode(reply, add_special_tokens=False) + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
        self.calls: list[list[list[int]]] = []

    def generate(self, prompts, images, num_generations, profiler=None):
        assert images is None and num_generations == 1
        self.calls.append([list(p) for p in prompts])
        return prompts, [list(self.ids) for _ in prompts], [[[-0.25, -3.0] for _ in self.ids] for _ in prompts], None


@pytest.mark.parametrize("env_id", ["trace/retail-v0", "trace/precondition_verification-v0"])
def test_with_use_vllm_every_turn_is_one_request_to_trls_vllm_generation(env_id):
    import inspect
    from types import SimpleNamespace

    pytest.importorskip("trl")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.generation.vllm_generation import VLLMGeneration

    from trace_gym.agents.chat import render_prompt
    from trace_gym.interop import TRLRollouts, trl_dataset

    assert list(inspect.signature(_VLLMGeneration.generate).parameters) == \
        list(inspect.signature(VLLMGeneration.generate).parameters)
    tokenizer = AutoTokenizer.from_pretrained(FIXTURE)
    reply = "I am sorry, I cannot help with that."
    generation = _VLLMGeneration(tokenizer, reply)
    trainer = SimpleNamespace(use_vllm=True, vllm_generation=generation,
                              model=AutoModelForCausalLM.from_pretrained(FIXTURE))
    rollouts = TRLRollouts(env_id, tokenizer, prompt_style="compact")
    prompts = list(trl_dataset(env_id, [3, 4], prompt_style="compact")["prompt"]) * 2
    out = rollouts(prompts, trainer)
    # the env's own episodes with the same replies: their rewards, turn counts and prompts
    env = gym.make(env_id, prompt_style="compact")
    rewards, turns = [], []
    for seed in (3, 4, 3, 4):
        messages, info = env.reset(seed=seed)
        seen, done = [render_prompt(tokenizer, messages, info["tools"])], False
        while not done:
            messages, reward, terminated, truncated, info = env.step(reply)
            done = terminated or truncated
            if not done:
                seen.append(render_prompt(tokenizer, messages, info["tools"]))
        rewards.append(reward)
        turns.append(seen)
    assert out["trace_reward"] == rewards
    # turn t of every episode still going went out in request t, as the chat template renders it
    assert len(generation.calls) == max(len(t) for t in turns)
    for t, call in enumerate(generation.calls):
        assert call == [seen[t] for seen in turns if len(seen) > t]
    for completion, mask, logp in zip(out["completion_ids"], out["env_mask"], out["logprobs"]):
        sampled = [tok for tok, m in zip(completion, mask) if m]
        assert sampled[:len(generation.ids)] == generation.ids
        assert {lp for lp, m in zip(logp, mask) if m} == {-0.25}


def test_with_use_vllm_in_several_processes_the_rollouts_refuse():
    from types import SimpleNamespace

    from trace_gym.errors import TraceGymError
    from trace_gym.interop import TRLRollouts, trl_dataset

    pytest.importorskip("trl")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(FIXTURE)
    model = AutoModelForCausalLM.from_pretrained(FIXTURE)
    trainer = SimpleNamespace(use_vllm=True, vllm_generation=None, model=model,
                              accelerator=SimpleNamespace(num_processes=2, unwrap_model=lambda m: m))
    rollouts = TRLRollouts("trace/retail-v0", tokenizer)
    with pytest.raises(TraceGymError, match="runs in one process"):
        rollouts(list(trl_dataset("trace/retail-v0", [0])["prompt"]), trainer)
