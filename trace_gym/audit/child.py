"""The sandboxed side of an audit: `python -m trace_gym.audit.child MODE ENVREF [SETTINGS]`.

Before the audited module is imported, an audit hook refuses network use, running programs
and writing files (in addition to the operating-system limits the parent set). MODE `kit`
prints the kit's results as JSON; MODE `fingerprint` prints what each seed must reproduce.
"""

from __future__ import annotations

import json
import os
import sys

_REFUSED_PREFIXES = ("socket.", "subprocess.", "os.system", "os.exec", "os.spawn", "os.posix_spawn",
                     "os.fork", "os.forkpty", "os.kill", "os.remove", "os.rename", "os.rmdir",
                     "os.mkdir", "shutil.", "ctypes.", "urllib.", "http.", "ftplib.", "smtplib.",
                     "webbrowser.", "pty.", "os.chmod", "os.truncate", "os.symlink", "os.link")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _guard(event: str, args: tuple) -> None:
    if event.startswith(_REFUSED_PREFIXES):
        raise PermissionError(f"sandbox: {event} is refused during an audit")
    if event == "open":
        mode, flags = (args[1] if len(args) > 1 else None), (args[2] if len(args) > 2 else 0)
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (isinstance(flags, int) and flags & _WRITE_FLAGS):
            raise PermissionError(f"sandbox: writing {args[0]!r} is refused during an audit")


def main() -> None:
    sys.dont_write_bytecode = True
    mode, ref_json = sys.argv[1], sys.argv[2]
    # Import what the kit needs before the hook, then forbid the outside world.
    from trace_gym.testing import KitSettings, run_kit
    from trace_gym.testing.envref import EnvRef
    from trace_gym.testing.policies import fingerprint

    sys.addaudithook(_guard)
    ref = EnvRef.from_json(ref_json)
    if mode == "fingerprint":
        env = ref.make()
        seeds = json.loads(sys.argv[3])
        print(json.dumps({str(s): fingerprint(env, s) for s in seeds}, sort_keys=True))
        return
    settings = KitSettings(**json.loads(sys.argv[3])) if len(sys.argv) > 3 else KitSettings()
    try:
        ref.env_class()
    except BaseException as exc:  # noqa: BLE001  (the module itself failed to load)
        print(json.dumps({"load_error": f"{type(exc).__name__}: {exc}"}))
        return
    report = run_kit(ref, settings, skip=["determinism_across_processes"])
    print(json.dumps({"results": [r.to_json(timings=True) for r in report.results]}))


if __name__ == "__main__":
    main()
