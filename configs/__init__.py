"""Run configurations that ship with trace-gym (installed as `trace_gym.configs`).

- `embedded.toml`: the embedded default's single source (SmolLM2-135M on a CPU): the
  target and capability envs' knobs, the base-agent recipe, the trainer recipe.
- `gpu-qwen3-30b-a3b.toml`: the paper's recipe (Qwen3-30B-A3B, vLLM rollouts).
- `tiny-cpu.toml`: the pipeline's smoke run on the committed fixture model.

Every command that takes `--config` accepts a shipped config by name (`--config embedded`)
or a path (`trace_gym.resources.config_path`).
"""
