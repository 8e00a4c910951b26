"""Run configurations that ship with trace-gym (installed as `trace_gym.configs`).

- `embedded.toml`: the embedded default's single source (SmolLM2-135M on a CPU): the
  target and capability envs' knobs, the base-agent recipe, the trainer recipe, every stage
  of `trace-gym pipeline` (its default) and the smoke budget on the committed fixture model.
- `gpu-qwen3-30b-a3b.toml`: the paper's recipe (Qwen3-30B-A3B, vLLM rollouts).

Every command that takes `--config` accepts a shipped config by name (`--config embedded`)
or a path (`trace_gym.resources.config_path`).
"""
