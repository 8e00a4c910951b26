"""The sandboxes: generated env code runs here, never in a trusted process, and so does every
command an agent or a verifier runs.

An env worker (`trace_gym.sandbox.worker`) loads a module and hosts env instances inside a
bubblewrap sandbox (or the fallback isolation, only when asked for by name; see
`trace_gym.sandbox.isolation`), and every answer it sends is read as hostile
(`trace_gym.sandbox.pool.read_answer`). `RemoteEnv` is the Gymnasium env that drives one instance
over a pipe, and `WorkerPool` spreads many instances over a few workers. The property kit,
rollouts, calibration and training use generated envs only through `RemoteEnv`; the
registry makes one for every env whose manifest entry is not `origin: shipped`.

A command (a coding agent's shell command, a test run) runs in the command jail
(`trace_gym.sandbox.jail`), over a copy of a workspace's files (`trace_gym.sandbox.workspace`);
an env worker cannot start one and asks its client to. bubblewrap's command line is built
for both sandboxes in one place (`trace_gym.sandbox.bwrap`). Domains build on this package;
it imports none of them.
"""

from trace_gym.sandbox.isolation import Isolation, IsolationUnavailable, Limits, bubblewrap_status, resolve
from trace_gym.sandbox.pool import (
    EnvWorkerError,
    RemoteEnvError,
    WorkerLost,
    WorkerPool,
    WorkerTimeout,
    default_pool,
)
from trace_gym.sandbox.proxy import EnvSource, RemoteEnv

__all__ = [
    "EnvSource", "RemoteEnv", "WorkerPool", "default_pool", "Limits", "Isolation", "IsolationUnavailable",
    "EnvWorkerError", "RemoteEnvError", "WorkerLost", "WorkerTimeout", "bubblewrap_status", "resolve",
]
