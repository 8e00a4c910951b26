"""`python -m trace_gym.cli`: the same as the `trace-gym` command."""

from trace_gym.cli import main

raise SystemExit(main())
