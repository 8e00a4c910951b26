"""A stand-in for the audit's trusted process (`trace_gym.audit.runner`) that misbehaves as
TRACE_GYM_TEST_RUNNER says, to check that `audit()` holds its budgets whatever happens in
there (its pid goes to the file TRACE_GYM_TEST_RUNNER_PID names): 'sleep' never answers, 'memory' grows past its memory budget, 'detached' leaves a
program holding its stdout and never answers."""

from __future__ import annotations

import os
import subprocess
import sys
import time

if __name__ == "__main__":
    sys.stdin.buffer.read()
    with open(os.environ["TRACE_GYM_TEST_RUNNER_PID"], "w") as f:
        f.write(str(os.getpid()))
    what = os.environ.get("TRACE_GYM_TEST_RUNNER", "sleep")
    if what == "memory":
        held = [bytearray(2**26) for _ in range(64)]  # 4 GiB, past any budget
    elif what == "detached":
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)  # hostile-runner-child"],
                         start_new_session=True)
    time.sleep(600)
