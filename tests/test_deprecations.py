"""Every renamed public name is still importable under its old name for one release: the old
name warns (a DeprecationWarning that names the new one) and is the very same object."""

from __future__ import annotations

import importlib
import warnings

import pytest

RENAMED = [
    # (old module, old name, new module, new name)
    ("trace_gym.capability", "CapabilityEnv", "trace_gym.capability_env", "CapabilityEnv"),
    ("trace_gym.capability", "CapabilityConfig", "trace_gym.capability_env", "CapabilityConfig"),
    ("trace_gym.capability", "final_reply", "trace_gym.capability_env", "final_reply"),
    ("trace_gym.capability", "DOMAIN_TOOLS", "trace_gym.capability_env", "DOMAIN_TOOLS"),
    ("trace_gym.config", "require", "trace_gym.validation", "require"),
    ("trace_gym.driver", "Episode", "trace_gym.driver", "EpisodeRequest"),
    ("trace_gym.driver", "Played", "trace_gym.driver", "PlayedEpisode"),
    ("trace_gym.agents.episodes", "Request", "trace_gym.driver", "EpisodeRequest"),
    ("trace_gym.agents.episodes", "Rollout", "trace_gym.driver", "PlayedEpisode"),
    ("trace_gym.env", "Episode", "trace_gym.env", "EpisodeState"),
    ("trace_gym.targets.task", "Request", "trace_gym.targets.task", "CustomerRequest"),
    ("trace_gym.tools_common", "calculate_tool", "trace_gym.worlds.generic_tools", "calculate_tool"),
    ("trace_gym.tools_common", "transfer_tool", "trace_gym.worlds.generic_tools", "transfer_tool"),
    ("trace_gym.tools_common", "evaluate_arithmetic", "trace_gym.worlds.generic_tools", "evaluate_arithmetic"),
    ("trace_gym.tools_common", "TRANSFER_MESSAGE", "trace_gym.worlds.generic_tools", "TRANSFER_MESSAGE"),
]


@pytest.mark.parametrize(("old_module", "old_name", "new_module", "new_name"), RENAMED,
                         ids=[f"{m}.{n}" for m, n, _, _ in RENAMED])
def test_an_old_name_warns_and_is_the_new_object(old_module, old_name, new_module, new_name):
    old = importlib.import_module(old_module)
    with pytest.warns(DeprecationWarning) as caught:
        value = getattr(old, old_name)
    assert value is getattr(importlib.import_module(new_module), new_name)
    message = str(caught[0].message)
    assert old_name in message and new_name in message and new_module in message


@pytest.mark.parametrize("old_module", sorted({m for m, _, _, _ in RENAMED}))
def test_an_old_module_has_no_other_names(old_module):
    old = importlib.import_module(old_module)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # hasattr swallows only AttributeError: a warning turned error would escape it
        assert not hasattr(old, "no_such_name") and not hasattr(old, "_private")


def test_a_from_import_of_an_old_name_warns():
    with pytest.warns(DeprecationWarning, match="trace_gym.validation"):
        from trace_gym.config import require
    from trace_gym.validation import require as new

    assert require is new


def test_a_generated_env_written_against_an_old_module_still_passes_the_static_audit():
    from trace_gym.audit.static import check_source

    assert check_source("from trace_gym.capability import CapabilityEnv, final_reply\n") == []
    assert check_source("import trace_gym.capability as c\nx = c.CapabilityEnv\n") == []
    assert check_source("from trace_gym.env import Episode\n") == []
    refused = check_source("from trace_gym.capability import dataclass\n")
    assert [f.rule for f in refused] == ["reach"]


def test_the_synthesis_prompt_names_only_the_new_modules():
    from trace_gym.audit.static import DEPRECATED_MODULES
    from trace_gym.synthesis.prompt import CONTRACT, audit_rules

    text = CONTRACT + audit_rules()
    for old, new in DEPRECATED_MODULES.items():
        assert new in text and f"{old}," not in text and f"{old}." not in text
