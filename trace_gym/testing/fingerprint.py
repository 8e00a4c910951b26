"""`python -m trace_gym.testing.fingerprint ENVREF_JSON SEEDS_JSON`: print, as JSON, what each
seed must reproduce (task, world, oracle transcript, reward). Run in fresh processes to
check determinism across PYTHONHASHSEED."""

from __future__ import annotations

import json
import sys

from trace_gym.testing.envref import EnvRef
from trace_gym.testing.policies import fingerprint


def main() -> None:
    ref = EnvRef.from_json(sys.argv[1])
    env = ref.make()
    print(json.dumps({str(seed): fingerprint(env, seed) for seed in json.loads(sys.argv[2])}, sort_keys=True))


if __name__ == "__main__":
    main()
