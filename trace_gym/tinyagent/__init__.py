"""The embedded base agent: a tiny Qwen3-architecture model built locally (see build.py)."""
