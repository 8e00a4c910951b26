"""Every model is loaded through one function, with the Hub's kernels off."""

from __future__ import annotations

import re

from tests.conftest import REPO

FIXTURE = REPO / "tests" / "fixtures" / "tiny_agent"


def test_models_load_without_hub_kernels():
    # transformers >= 5.25 turns them on by default: on CUDA the first train() fetches
    # kernels-community layers from the Hub (an offline machine fails there)
    from trace_gym.agents.causal_lm import load_causal_lm

    model = load_causal_lm(FIXTURE)
    assert model.use_kernels is False
    model.train()
    model.eval()
    assert model.use_kernels is False


def test_no_step_loads_a_model_any_other_way():
    direct = re.compile(r"\b\w*ForCausalLM\.from_pretrained\(")
    folders = ("trace_gym", "trainer", "moe", "analysis", "pipeline", "benchmarks", "generated_envs")
    found = [f"{path.relative_to(REPO)}:{number}"
             for folder in folders for path in sorted((REPO / folder).rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if direct.search(line) and "use_kernels=False" not in line and path.name != "causal_lm.py"]
    assert found == []
