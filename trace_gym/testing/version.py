"""The property kit's version, a module of its own so that the audit lock reads it without
importing the kit (which imports the registry, which reads the lock)."""

KIT_VERSION = "11"
"""Bumped when a property changes what it accepts (a lock entry of another version is stale)."""
