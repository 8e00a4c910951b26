"""`trace/coding-v0`: fix the bug a user's issue reports in a generated Python package.

Task. Per seed, a package of six modules (arithmetic, text, parsers, order lines, small
algorithms, reports built on the others) with a visible test suite, one bug injected at a
random site of one function (off-by-one, wrong comparison, swapped arguments, missing edge
case, wrong default, mutated constant, wrong operator), and an issue with a reproducing
snippet that names no file, module or line (`trace_gym.coding.repo`). Names, statement
style and function order vary per seed; test seeds add templates no train seed has.

Tools (SWE-agent's interface in spirit, `trace_gym.coding.tools`): list_files, open_file,
search, edit_file, create_file, run_command, run_tests, submit. Commands and tests run in
a bubblewrap sandbox over a copy of the repository: no network, about 10 s of CPU, 1 GiB,
64 MiB per file, a process cap (`trace_gym.sandbox.jail`).

Reward. After submit (or a reply without a tool call), the package's .py files are copied
into a fresh sandbox and the hidden tests' calls run there; their outcomes are compared
here with the correct package's: 1.0 when every FAIL_TO_PASS test (inputs other than the
snippet's, on which the bug shows) and every PASS_TO_PASS test passes, else 0. The verdict
lists each test, and two checks of credit 0: `localized`, `reproduced`.

Episode end. submit, a reply without a tool call, or the step limit (`max_steps`, default 30).

Arguments (`gym.make` keyword arguments): `max_steps`, `prompt_style` ("full" or "compact").

Version history: v0, first version (unreleased; changes are in CHANGELOG.md).
"""

from __future__ import annotations

import shlex
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from trace_gym import messages as msg
from trace_gym.coding import DOMAIN
from trace_gym.coding.repo import AWAY_SHARE, CodingTask, generate
from trace_gym.coding.tools import RUNS, TOOLS, tool_names
from trace_gym.coding.verify import verify_fix
from trace_gym.coding.workspace import Repo
from trace_gym.env import EpisodeState, NewEpisode, TraceEnv
from trace_gym.rng import Rng
from trace_gym.seeding import split_of
from trace_gym.tools import Toolset
from trace_gym.validation import require
from trace_gym.verdict import Verdict
from trace_gym.worlds.domain import PROMPT_STYLES

RULES = {
    "full": ("Work like this: reproduce the issue (run_command with the snippet), find the code it reaches "
             "(search, open_file), fix the smallest wrong piece (edit_file), run the tests (run_tests), then "
             "call submit. Hidden tests, on other inputs, decide whether the bug is fixed."),
    "compact": "Reproduce, find the wrong code, fix it with edit_file, run_tests, then submit.",
}
HINT = ("Run the issue's snippet first and compare what it prints with what the issue expects. The function "
        "the snippet calls may itself call other functions: read each one it reaches before deciding which "
        "line is wrong. Fix the code, not the tests, and make the fix hold for every input, not only the "
        "snippet's.")


@dataclass(frozen=True)
class CodingConfig:
    """The coding target's knobs."""

    max_steps: int = 30
    """The step limit (turns) of an episode."""
    prompt_style: str = "full"
    """System prompt: the full rules ("full") or the short ones for tiny models ("compact")."""

    def __post_init__(self) -> None:
        require(self, "max_steps", type(self.max_steps) is int and 3 <= self.max_steps <= 400,
                "must be an integer in [3, 400]")
        require(self, "prompt_style", self.prompt_style in PROMPT_STYLES, f"allowed: {', '.join(PROMPT_STYLES)}")


def system_prompt(style: str) -> str:
    """The coding domain's system prompt in a style."""
    return f"{DOMAIN.intro}\n\n{RULES[style]}"


class CodingEpisodeEnv(TraceEnv[CodingTask, Repo]):
    """What every coding env shares: a generated task's repository as the world, the issue
    as the opening, the episode ended by a reply or by the env's end tool. Subclasses name
    their tools, config, instructions and hint, and supply `verify` and `oracle_action`."""

    TOOLSET: ClassVar[Toolset] = TOOLS
    CONFIG: ClassVar[type[CodingConfig]] = CodingConfig
    INSTRUCTIONS: ClassVar[str] = ""
    """Appended to the system prompt (what a capability env asks instead of a fix)."""
    HINT: ClassVar[str] = HINT
    AWAY_SHARE: ClassVar[float] = AWAY_SHARE
    """The share of tasks whose bug is away from the issue's function (one or two calls)."""
    CAPABILITIES: ClassVar[tuple[str, ...] | None] = None
    """The capabilities its tasks need (None: the generator's, both coding ones)."""
    END_TOOL: ClassVar[str] = "submit"
    END_REASON: ClassVar[str] = "submitted"

    def __init__(self, render_mode: str | None = None, max_steps: int | None = None,
                 prompt_style: str = "full") -> None:
        super().__init__(self.TOOLSET, render_mode)
        steps = self.CONFIG().max_steps if max_steps is None else max_steps
        self.config = self.CONFIG(max_steps=steps, prompt_style=prompt_style)

    _held_out: bool = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[list, dict[str, Any]]:
        """Start a new episode (`TraceEnv.reset`); a test seed's package may hold the
        held-out templates (`trace_gym.coding.repo.generate`)."""
        self._held_out = type(seed) is int and split_of(seed) == "test"
        return super().reset(seed=seed, options=options)

    def _new_episode(self, rng: Rng) -> NewEpisode:
        task = generate_once(rng, self.AWAY_SHARE, self._held_out)
        if self.CAPABILITIES is not None:
            task = replace(task, capabilities_needed=list(self.CAPABILITIES))
        prompt = system_prompt(self.config.prompt_style)
        if self.INSTRUCTIONS:
            prompt = f"{prompt}\n\n{self.INSTRUCTIONS}"
        return NewEpisode(task=task, world=Repo(dict(task.files)), system_prompt=prompt,
                          opening=[msg.user(task.issue)], max_steps=self.config.max_steps, hint=self.HINT)

    def _after_reply(self, episode: EpisodeState, text: str) -> str | None:
        return "replied"

    def _after_tools(self, episode: EpisodeState, names: list[str]) -> str | None:
        return self.END_REASON if self.END_TOOL in names else None


_GENERATED: OrderedDict[tuple, tuple[CodingTask, tuple]] = OrderedDict()
_GENERATED_LOCK = threading.Lock()
_KEEP = 1024


def generate_once(rng: Rng, away_share: float, held_out: bool) -> CodingTask:
    """`generate`'s task, made once for each state of the stream (the last 1,024 are kept: the
    kit and the benchmarks play many policies on the same seeds, and a generation costs tens
    of milliseconds); the stream ends in the state `generate` leaves it in either way."""
    key = (rng.state(), away_share, held_out)
    with _GENERATED_LOCK:
        kept = _GENERATED.get(key)
        if kept is not None:
            _GENERATED.move_to_end(key)
    if kept is None:
        task = generate(rng, away_share, held_out=held_out)
        kept = (task, rng.state())
        with _GENERATED_LOCK:
            _GENERATED[key] = kept
            if len(_GENERATED) > _KEEP:
                _GENERATED.popitem(last=False)
    else:
        rng.set_state(kept[1])
    return kept[0]


class CodingEnv(CodingEpisodeEnv):
    """trace/coding-v0 (see the module docstring)."""

    def verify(self, task: Any, initial_world: Any, final_world: Any, messages: list[msg.Message]) -> Verdict:
        """The hidden tests' verdict (`trace_gym.coding.verify.verify_fix`)."""
        return verify_fix(task, initial_world, final_world, messages)

    def oracle_action(self, messages: list[msg.Message]) -> Any:
        """Run the snippet, fix the bug (restoring any other package file changed), submit."""
        return fix_oracle(self.episode.task, self.episode.initial_world, self.episode.world, messages)


def fix_oracle(task: CodingTask, initial: Repo, repo: Repo, messages: list[msg.Message]) -> dict[str, Any]:
    """The next oracle turn: reproduce first, then the fix's edit, then submit."""
    if not any(n in RUNS for n in tool_names(messages)):
        return {"name": "run_command", "arguments": {"command": f"python -c {shlex.quote(task.snippet)}"}}
    fixed = task.fixed_files
    for path in sorted(p for p in fixed if p.startswith(task.package + "/")):
        if repo.files.get(path) == fixed[path]:
            continue
        if path == task.bug_file and repo.files.get(path) == initial.files[path]:
            return {"name": "edit_file", "arguments": {"path": path, "start_line": task.fix_start,
                                                       "end_line": task.fix_end, "new_text": task.fixed_text}}
        return {"name": "create_file", "arguments": {"path": path, "content": fixed[path]}}
    return {"name": "submit", "arguments": {}}
