"""Installed as `trace_gym.prompts`: the markdown prompts are its package data."""
