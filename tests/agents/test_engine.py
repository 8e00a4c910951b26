"""The inference engine on the committed fixture: greedy decoding equals transformers'
`generate`; reuse prefills only what changed, for a template that renders earlier turns the
same way and for one that does not, and changes no output; fork; seeded sampling; log-probs."""

from __future__ import annotations

import pytest

from tests.conftest import REPO

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trace_gym.agents.engine import Engine, common_prefix, sample

FIXTURE = REPO / "tests" / "fixtures" / "tiny_agent"


@pytest.fixture(scope="module")
def model_and_tokenizer():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    return AutoModelForCausalLM.from_pretrained(FIXTURE).eval(), AutoTokenizer.from_pretrained(FIXTURE)


def _ids(tokenizer, messages, tools=None, template=None):
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True,
                                         chat_template=template)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _conversation(turns: int):
    """A scripted conversation whose assistant turns think before they act; a tool answers
    the even turns, the customer the odd ones."""
    messages = [{"role": "system", "content": "You help customers with their orders."},
                {"role": "user", "content": "Hi, I want to cancel order #W1234567."}]
    for t in range(turns):
        messages.append({"role": "assistant", "content": f"<think>step {t}: look it up</think>Let me check {t}."})
        if t % 2 == 0:
            messages.append({"role": "tool", "content": f"{{\"order\": {t}, \"status\": \"pending\"}}"})
        else:
            messages.append({"role": "user", "content": f"Sure, the reason is number {t}."})
    return messages


def _qwen3_like(template: str) -> str:
    """The fixture's template, made to drop the `<think>` blocks of assistant turns before the
    last customer message, as Qwen3's own template does: not prefix-stable (a customer's
    answer rewrites the turns before it)."""
    old = "{%- if message.content %}{{ message.content }}{% endif %}"
    assert old in template
    new = ("{%- if message.content %}{% set ns2 = namespace(later=false) %}"
           "{% for m in messages[i + 1:] %}{% if m.role == 'user' %}{% set ns2.later = true %}{% endif %}{% endfor %}"
           "{{ message.content.split('</think>')[-1] if ns2.later else message.content }}{% endif %}")
    return template.replace(old, new)


def test_greedy_decoding_equals_generate_in_a_batch(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    prompts = [_ids(tokenizer, _conversation(t)) for t in (0, 2, 1)]
    assert len({len(p) for p in prompts}) == 3  # different lengths: left padding is exercised
    engine = Engine(model, tokenizer)
    out = engine.generate([engine.new_sequence() for _ in prompts], prompts, max_new_tokens=12)
    for prompt, generation in zip(prompts, out):
        expected = model.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, eos_token_id=end,
                                  pad_token_id=0)[0, len(prompt):].tolist()
        assert generation.token_ids == expected
        assert generation.stopped == (expected[-1] == end)


def test_a_reused_arena_and_rows_that_finish_early_change_no_output():
    """The batch arena kept between calls (holding an earlier batch's keys), and the in-place
    compaction when rows stop at different steps, give what a fresh engine gives row by row.
    (A random model, whose rows differ: the fixture writes the same tokens after any prompt.)"""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=24, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2,
                                         initializer_range=0.5)).eval()
    tokenizer = type("Tokens", (), {"decode": staticmethod(lambda ids, **kw: " ".join(map(str, ids)))})()
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, 24, (n,), generator=g).tolist() for n in (30, 9, 21, 14, 17)]
    engine = Engine(model, tokenizer, stop_ids=[2])
    engine.generate([engine.new_sequence() for _ in prompts], prompts, max_new_tokens=16)  # fills the arena
    with torch.inference_mode():
        for k, v in engine._arena:  # whatever the arena held, the masked padding reads as nothing
            k.fill_(float("nan"))
            v.fill_(float("nan"))
    again = engine.generate([engine.new_sequence() for _ in prompts[1:]], prompts[1:], max_new_tokens=12)
    alone = [Engine(model, tokenizer, stop_ids=[2]).generate([engine.new_sequence()], [p], max_new_tokens=12)[0]
             for p in prompts[1:]]
    assert [g.token_ids for g in again] == [g.token_ids for g in alone]
    lengths = [len(g.token_ids) for g in again]
    assert min(lengths) < max(lengths) and not all(g.stopped for g in again), lengths  # rows left the batch early


@pytest.mark.parametrize("stable", [True, False], ids=["prefix-stable", "qwen3-like"])
def test_reuse_prefills_only_what_changed_and_changes_no_output(model_and_tokenizer, stable):
    model, tokenizer = model_and_tokenizer
    template = tokenizer.chat_template if stable else _qwen3_like(tokenizer.chat_template)
    reuse, fresh = Engine(model, tokenizer), Engine(model, tokenizer, reuse=False)
    seq, baseline = reuse.new_sequence(), fresh.new_sequence()
    diverged_early = False
    for turns in range(4):
        prompt = _ids(tokenizer, _conversation(turns), template=template)
        shared = common_prefix(seq.ids, prompt)
        diverged_early |= 0 < len(seq.ids) and shared < len(seq.ids) - 8
        before = reuse.stats.prefilled
        a = reuse.generate([seq], [prompt], max_new_tokens=6)[0]
        b = fresh.generate([baseline], [prompt], max_new_tokens=6)[0]
        assert a.token_ids == b.token_ids
        # exactly the tokens from the first one that differs are prefilled
        assert reuse.stats.prefilled - before == len(prompt) - min(shared, len(prompt) - 1)
        # ... and the cache is then what a full prefill computes
        check = fresh.new_sequence()
        fresh.extend(check, seq.ids)
        for mine, full in zip(seq.layers, check.layers):
            assert torch.allclose(mine.keys, full.keys, atol=1e-5)
    # the Qwen3-like template rewrites an earlier turn: reuse stops before the end of the cache
    assert diverged_early == (not stable)
    assert reuse.stats.prefilled < fresh.stats.prefilled
    if stable:
        assert reuse.stats.prefilled <= len(prompt) + 4 * 6
    else:
        assert reuse.stats.prefilled > len(prompt) + 4 * 6


def test_fork_prefills_the_shared_prompt_once(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    engine = Engine(model, tokenizer)
    prompt = _ids(tokenizer, _conversation(1))
    root = engine.new_sequence()
    engine.extend(root, prompt)
    assert engine.stats.prefilled == len(prompt)
    group = root.fork(4)
    gens = [torch.Generator().manual_seed(s) for s in range(4)]
    out = engine.generate(group, max_new_tokens=10, temperature=1.0, generators=gens, logprobs=True)
    assert engine.stats.prefilled == len(prompt)
    assert len({tuple(g.token_ids) for g in out}) > 1  # the copies sample apart
    assert root.ids == prompt and root.layers[0].length == len(prompt)  # the root is untouched
    # the same seeds give the same completions, forked or each prefilled on its own
    alone = Engine(model, tokenizer)
    again = alone.generate([alone.new_sequence() for _ in range(4)], [prompt] * 4, max_new_tokens=10,
                           temperature=1.0, generators=[torch.Generator().manual_seed(s) for s in range(4)])
    assert [g.token_ids for g in again] == [g.token_ids for g in out]
    # a fork of a prefix drops the rest
    part = root.fork(1, length=5)[0]
    assert part.ids == prompt[:5] and part.layers[0].length == 5 and part.next_logits is None


def test_log_probs_are_the_models(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    engine = Engine(model, tokenizer)
    prompt = _ids(tokenizer, _conversation(0))
    out = engine.generate([engine.new_sequence()], [prompt], max_new_tokens=8, temperature=0.7,
                          generators=torch.Generator().manual_seed(3), logprobs=True)[0]
    full = torch.tensor([prompt + out.token_ids])
    with torch.no_grad():
        logits = model(full).logits[0, len(prompt) - 1: -1] / 0.7                 # (N, V)
    expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(out.token_ids)[:, None])[:, 0]
    assert torch.allclose(torch.tensor(out.logprobs), expected, atol=1e-4)


def test_sampling_follows_temperature_and_top_p():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]] * 2)
    greedy = sample(logits, 0.0, 1.0, [None, None])
    assert greedy.tolist() == [0, 0]
    # top-p below the top token's mass leaves only that token
    assert sample(logits, 1.0, 0.3, [torch.Generator().manual_seed(s) for s in (1, 2)]).tolist() == [0, 0]
    draws = [int(sample(logits[:1], 1.0, 1.0, [torch.Generator().manual_seed(s)])[0]) for s in range(200)]
    assert set(draws) == {0, 1, 2, 3}
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    assert sample(logits, 1.0, 0.9, [g1, g2]).tolist()[0] == sample(logits, 1.0, 0.9, [torch.Generator().manual_seed(9)] * 2).tolist()[0]


def test_the_policy_reuses_caches_across_turns_without_changing_its_turns():
    from trace_gym.agents.local import LocalModelPolicy
    from trace_gym.rollout import Job, run_batched

    jobs = [Job("trace/airline-v0", s, 0) for s in (0, 1, 2)]
    kwargs = {"prompt_style": "compact", "max_requests": 1}
    policies = {}

    def factory(reuse):
        def make():
            policies[reuse] = LocalModelPolicy(FIXTURE, temperature=0.0, max_new_tokens=24, kv_reuse=reuse)
            return policies[reuse]
        return make

    runs = {reuse: sorted(run_batched(jobs, factory(reuse), workers=3, env_kwargs=kwargs), key=lambda r: r["seed"])
            for reuse in (True, False)}
    assert [r["messages"] for r in runs[True]] == [r["messages"] for r in runs[False]]
    with_reuse, without = policies[True].engine.stats, policies[False].engine.stats
    assert with_reuse.prefilled < without.prefilled / 2, (with_reuse, without)
