"""The reset leak check: does what the agent sees before acting tell the task's decision?

An agent learns from everything it is shown. If a field of the reset (`info["max_steps"]`,
a hint that names the capabilities the task needs, the system prompt) differs with the
decision the agent must take from the records (`task.to_json()["decision"]`: allowed or
forbidden), a policy can read the decision off it and skip the records. The check is a
lookup table: for each field, and each pair of fields, the exact values seen on train
seeds vote for the decision most often seen with them; a value never seen votes for the
majority class. Fitted on train seeds, scored on test seeds, no table may beat the
majority class by more than `MAX_GAIN` (`wording.py`). A table is the simplest rule an
adversary could learn, and the only one that needs no model of what the values mean.

The fields are the reset `info` (every key, as canonical JSON) and each system and user
message of the observation, from hinted and unhinted resets alike: the agent sees one or
the other. Tool results an env has already fetched into the conversation (the records a
capability env hands over) are left out: the records are where the decision is meant to
be read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from trace_gym.jsondata import canonical_json

Fields = dict[str, str]


def observed_fields(obs: list[dict[str, Any]], info: dict[str, Any]) -> Fields:
    """Field name -> its exact value, for one reset: each key of `info`, and each system and
    user message (the records in tool results are the agent's to read)."""
    out = {f"info.{key}": canonical_json(value) for key, value in info.items()}
    for i, m in enumerate(obs):
        if m["role"] in ("system", "user"):
            out[f"obs[{i}]"] = canonical_json(m.get("content"))
    return out


def reset_fields(env: Any, seeds: list[int]) -> list[tuple[Fields, str]]:
    """(fields, decision) of every seed's hinted and unhinted reset whose task has a decision."""
    out = []
    for seed in seeds:
        for hint in (False, True):
            obs, info = env.reset(seed=seed, options={"hint": hint})
            decision = env.task.to_json().get("decision")
            if decision is not None:
                out.append((observed_fields(obs, info), canonical_json(decision)))
    return out


@dataclass(frozen=True)
class LeakResult:
    """How well the best lookup table on the observed fields predicts a task's decision, against
    the majority class."""

    table: float
    """Accuracy of the best lookup table on the test resets."""
    majority: float
    """Accuracy of always predicting the train resets' most common decision."""
    fields: tuple[str, ...]
    """The field (or pair) of the best table."""
    tested: int
    trained: int

    @property
    def gain(self) -> float:
        """The table's accuracy over the majority class's."""
        return self.table - self.majority

    def describe(self) -> str:
        """The result in a line, for a property's detail."""
        return (f"best lookup table ({' + '.join(self.fields) or 'none'}) {self.table:.3f} vs majority class "
                f"{self.majority:.3f} on {self.tested} test resets (fitted on {self.trained}): {self.gain:+.3f}")


def _accuracy(key: tuple[str, ...], train: list[tuple[Fields, str]], test: list[tuple[Fields, str]],
              majority: str) -> float:
    votes: dict[tuple[str | None, ...], Counter] = {}
    for fields, label in train:
        votes.setdefault(tuple(fields.get(k) for k in key), Counter())[label] += 1
    table = {value: counts.most_common(1)[0][0] for value, counts in votes.items()}
    hits = sum(table.get(tuple(fields.get(k) for k in key), majority) == label for fields, label in test)
    return hits / len(test)


def lookup_leak(train: list[tuple[Fields, str]], test: list[tuple[Fields, str]]) -> LeakResult:
    """The best lookup table over one field or a pair of fields of `train`, scored on `test`."""
    majority = Counter(label for _, label in train).most_common(1)[0][0]
    base = sum(label == majority for _, label in test) / len(test)
    names = sorted({k for fields, _ in train for k in fields})
    best_key: tuple[str, ...] = ()
    best = base
    for key in [(n,) for n in names] + list(combinations(names, 2)):
        accuracy = _accuracy(key, train, test, majority)
        if accuracy > best:
            best, best_key = accuracy, key
    return LeakResult(best, base, best_key, len(test), len(train))
