"""The inference engine on the committed fixture: greedy decoding equals transformers'
`generate`; reuse prefills only what changed, for a template that renders earlier turns the
same way and for one that does not, and changes no output; fork; seeded sampling; log-probs."""

from __future__ import annotations

import pytest

from tests.conftest import REPO

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trace_gym.agents.engine import Engine, common_prefix, sample, stream_seed, stream_uniforms

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
    assert len({len(p) for p in prompts}) == 3  # different lengths: rows padded on the left
    engine = Engine(model, tokenizer)
    out = engine.generate(prompts, max_new_tokens=12)
    for prompt, generation in zip(prompts, out):
        expected = model.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, eos_token_id=end,
                                  pad_token_id=0)[0, len(prompt):].tolist()
        assert generation.token_ids == expected
        assert generation.stopped == (expected[-1] == end)


def _random_model():
    """A random model whose rows differ (the fixture writes the same tokens after any prompt)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=24, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2,
                                         initializer_range=0.5)).eval()
    tokenizer = type("Tokens", (), {"decode": staticmethod(lambda ids, **kw: " ".join(map(str, ids)))})()
    return model.double(), tokenizer


def test_a_reused_arena_and_rows_that_finish_early_change_no_output():
    """The arena kept between calls (holding an earlier batch's keys, here overwritten with
    NaN), rows that stop at different steps and leave the batch, and rows that join while
    others decode, give what a fresh engine gives row by row."""
    model, tokenizer = _random_model()
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, 24, (n,), generator=g).tolist() for n in (30, 9, 21, 14, 17)]
    engine = Engine(model, tokenizer, stop_ids=[2])
    engine.generate(prompts, max_new_tokens=16)  # fills the arena
    with torch.inference_mode():
        for t in (*engine.k, *engine.v):  # whatever the arena held, the masked columns read as nothing
            t.fill_(float("nan"))
    engine.zeroed.clear()
    alone = [Engine(model, tokenizer, stop_ids=[2]).generate([p], max_new_tokens=12)[0] for p in prompts[1:]]
    again = engine.generate(prompts[1:], max_new_tokens=12)
    assert [g.token_ids for g in again] == [g.token_ids for g in alone]
    lengths = [len(g.token_ids) for g in again]
    assert min(lengths) < max(lengths) and not all(g.stopped for g in again), lengths  # rows left early
    # continuous: a row joins while others decode, a longer one too (every row moves right)
    joined: dict = {}
    for n, p in enumerate(prompts[1:3]):
        engine.submit(n, p, max_new_tokens=12)
    for _ in range(3):
        joined.update(engine.step())
    engine.submit(2, prompts[0], max_new_tokens=12)  # the longest prompt, after three steps
    while len(joined) < 3:
        joined.update(engine.step())
    reference = [alone[0], alone[1], Engine(model, tokenizer, stop_ids=[2]).generate([prompts[0]], max_new_tokens=12)[0]]
    assert [joined[n].token_ids for n in range(3)] == [r.token_ids for r in reference]


@pytest.mark.parametrize("stable", [True, False], ids=["prefix-stable", "qwen3-like"])
def test_reuse_prefills_only_what_changed_and_changes_no_output(model_and_tokenizer, stable):
    model, tokenizer = model_and_tokenizer
    template = tokenizer.chat_template if stable else _qwen3_like(tokenizer.chat_template)
    reuse, fresh = Engine(model, tokenizer), Engine(model, tokenizer, reuse=False)
    held: list[int] = []
    diverged_early = False
    for turns in range(4):
        prompt = _ids(tokenizer, _conversation(turns), template=template)
        shared = common_prefix(held, prompt)
        diverged_early |= 0 < len(held) and shared < len(held) - 8
        before = reuse.stats.prefilled
        reuse.submit("c", prompt, max_new_tokens=6)
        fresh.submit("c", prompt, max_new_tokens=6)
        a = _until(reuse, "c")
        b = _until(fresh, "c")
        assert a.token_ids == b.token_ids
        # exactly the tokens from the first one that differs are prefilled
        assert reuse.stats.prefilled - before == len(prompt) - min(shared, len(prompt) - 1)
        held = prompt + a.token_ids[:-1]
        # ... and the row then holds what a full prefill computes
        row = reuse.rows[reuse.index["c"]]
        assert row.ids == held
        check = Engine(model, tokenizer, reuse=False)
        check.submit("x", held, max_new_tokens=1)
        check.step()
        mine = reuse.k[0][reuse.index["c"], :, row.start: row.end]
        xrow = check.rows[0]
        full = check.k[0][0, :, xrow.start: xrow.end]
        assert torch.allclose(mine, full, atol=1e-5)
    # the Qwen3-like template rewrites an earlier turn: reuse stops before the end of the cache
    assert diverged_early == (not stable)
    assert reuse.stats.prefilled < fresh.stats.prefilled
    if stable:
        assert reuse.stats.prefilled <= len(prompt) + 4 * 6
    else:
        assert reuse.stats.prefilled > len(prompt) + 4 * 6


def _until(engine, key):
    while True:
        for done, generation in engine.step():
            if done == key:
                return generation


def test_a_shared_opening_is_prefilled_once(model_and_tokenizer):
    """A group that opens on one prompt (GRPO's rollouts of a seed) prefills it once; the
    copies sample apart, and give what each prefilled on its own gives."""
    model, tokenizer = model_and_tokenizer
    engine = Engine(model, tokenizer)
    prompt = _ids(tokenizer, _conversation(1))
    out = engine.generate([prompt] * 4, max_new_tokens=10, temperature=1.0, seeds=range(4), logprobs=True)
    assert engine.stats.prefilled == len(prompt) + 3  # the copies run only their last prompt token
    assert len({tuple(g.token_ids) for g in out}) > 1  # the copies sample apart
    alone = [Engine(model, tokenizer).generate([prompt], max_new_tokens=10, temperature=1.0, seeds=[s])[0]
             for s in range(4)]
    assert [g.token_ids for g in alone] == [g.token_ids for g in out]
    # a later conversation with the same opening copies it from the kept opening
    before = engine.stats.prefilled
    engine.generate([prompt + [5, 6]], max_new_tokens=2)
    assert engine.stats.prefilled - before == 2


def test_log_probs_are_the_models(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    engine = Engine(model, tokenizer)
    prompt = _ids(tokenizer, _conversation(0))
    out = engine.generate([prompt], max_new_tokens=8, temperature=0.7, seeds=[3], logprobs=True)[0]
    full = torch.tensor([prompt + out.token_ids])
    with torch.no_grad():
        logits = model(full).logits[0, len(prompt) - 1: -1] / 0.7                 # (N, V)
    expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(out.token_ids)[:, None])[:, 0]
    assert torch.allclose(torch.tensor(out.logprobs), expected, atol=1e-4)


def test_sampling_follows_temperature_and_top_p():
    import numpy as np

    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]] * 2)
    u = np.array([0.999, 0.5])
    assert sample(logits, [0.0, 0.0], [1.0, 1.0], u).tolist() == [0, 0]
    # top-p below the top token's mass leaves only that token, whatever the uniform
    assert sample(logits, [1.0, 1.0], [0.3, 0.3], u).tolist() == [0, 0]
    # one call samples each row by its own uniform: the frequencies follow softmax(logits / T)
    n = 20000
    draws = sample(logits[:1].expand(n, 4), [0.7] * n, [1.0] * n, stream_uniforms([7] * n, range(n)))
    freq = torch.bincount(draws, minlength=4).double() / n
    expected = torch.softmax(logits[0].double() / 0.7, -1)
    assert torch.allclose(freq, expected, atol=0.015), (freq, expected)
    # top-p 0.9 cuts the tail token (mass 0.032 after the first three reach 0.968 > 0.9)
    cut = sample(logits[:1].expand(n, 4), [1.0] * n, [0.9] * n, stream_uniforms([8] * n, range(n)))
    assert set(cut.tolist()) == {0, 1, 2}


def test_streams_are_counter_based():
    """A draw depends only on its stream's seed and its index, not on what is drawn beside it."""
    a = stream_uniforms([1, 2, 3], [0, 5, 9])
    b = stream_uniforms([3, 1], [9, 0])
    assert a[0] == b[1] and a[2] == b[0]
    many = stream_uniforms([11] * 10000, range(10000))
    assert 0.0 < many.min() and many.max() < 1.0 and abs(many.mean() - 0.5) < 0.01
    assert len(set(many.tolist())) == 10000
    assert stream_seed(1, 2) != stream_seed(2, 1) and stream_seed(1, 2) == stream_seed(1, 2)


def test_the_policy_reuses_caches_across_turns_without_changing_its_turns():
    from trace_gym.agents.local import LocalModelPolicy
    from trace_gym.driver import EpisodeRequest, play

    episodes = [EpisodeRequest(s) for s in (0, 1, 2)]
    kwargs = {"prompt_style": "compact", "max_requests": 1}
    policies = {}

    def factory(reuse):
        def make():
            policies[reuse] = LocalModelPolicy(FIXTURE, temperature=0.0, max_new_tokens=24, kv_reuse=reuse)
            return policies[reuse]
        return make

    runs = {reuse: sorted((p.record() for p in play(episodes, factory(reuse), env_id="trace/airline-v0",
                                                    env_kwargs=kwargs, in_flight=3)), key=lambda r: r["seed"])
            for reuse in (True, False)}
    assert [r["messages"] for r in runs[True]] == [r["messages"] for r in runs[False]]
    with_reuse, without = policies[True].engine.stats, policies[False].engine.stats
    assert with_reuse.prefilled < without.prefilled / 2, (with_reuse, without)
