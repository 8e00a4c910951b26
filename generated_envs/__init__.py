"""Capability environments, one module per capability, each listed in manifest.json.

Modules here are generated code: audit them (`trace-gym audit ENV_ID`) before training.
Importing this package imports none of them; the registry loads them lazily by entry point.
"""
