"""Code localization: name the file and the function that hold a reported bug.

Task. The coding target's generator (`trace_gym.coding.repo`): a small Python package
with one injected bug and a user's issue about it (a reproducing snippet, what it gives,
what was expected; never a file, module or line). The function the snippet calls always
calls others here; the bug is in it on half of the seeds, and (`ONE_CALL_AWAY`) in a
function it calls, directly or through another, on the other half, so the call graph
alone tells neither. Names and code style vary per seed, and test seeds add templates no
train seed has.

Tools. The coding target's reading and running tools (list_files, open_file, search,
run_command, run_tests, all in the sandbox where they run code) and `report_location`
(file, function), which ends the episode.

Reward. The first report_location call is scored: 1.0 when both the file and the function
are the bug's; 0.5 when the file is right and the function is not (partial credit: the
right module already narrows a fix to a few dozen lines); 0 otherwise. Ending without a
report (a reply, the step limit) scores 0.

Episode end. report_location, a reply without a tool call, or the step limit (12).

Transfer rationale. On SWE-bench, a failed run most often edits the wrong place: the
agent patches where the symptom shows (the function the issue names) while the fault sits
in a helper it calls. Here every episode starts from an issue that names only the public
call, and the reward is for finding where the wrong code is, with the same tools the target
offers, before any edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trace_gym import capabilities as cap
from trace_gym import messages as msg
from trace_gym.coding.env import CodingConfig, CodingEpisodeEnv
from trace_gym.coding.repo import CodingTask
from trace_gym.coding.tools import TOOLS
from trace_gym.coding.workspace import Repo
from trace_gym.schema import function, string
from trace_gym.tools import ToolKind, Toolset, tool
from trace_gym.verdict import Check, Verdict

CAPABILITY = cap.LOCALIZATION
ONE_CALL_AWAY = 0.5
"""The share of tasks whose bug lies in a helper of the function the issue calls (coding-v0
draws 0.3; a half is the most the generator takes): naming the issue's own function, or
one it calls, is then wrong half the time."""
FILE_ONLY_CREDIT = 0.5
"""The score of a report with the right file and another function."""
INSTRUCTIONS = ("Do not fix anything. Find where the bug lives, then call report_location with the file's "
                "path and the name of the function whose code is wrong.")
HINT = ("Start from the function the snippet calls. If its own lines are right, follow each call it makes "
        "into the other modules and read those; the wrong line is where the result first departs from what "
        "the docstring promises.")


@tool(ToolKind.GENERIC, function(
    "report_location", "Report where the bug is: the file and the function. This ends the task.",
    {"file": string("The file's path in the repository, e.g. 'pkg/module.py'."),
     "function": string("The name of the function whose code is wrong.")}))
def report_location(repo: Repo, file: str, function: str) -> str:
    """Acknowledged; the env scores the first report."""
    return "Reported."


LOCALIZATION_TOOLS = Toolset([*TOOLS.subset(["list_files", "open_file", "search", "run_command", "run_tests"])
                               .values(), report_location])


@dataclass(frozen=True)
class LocalizationConfig(CodingConfig):
    """The env's knobs: the coding target's, with a shorter step limit."""

    max_steps: int = 12


def first_report(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The arguments of the first report_location call, if any."""
    for m in messages:
        if m.get("role") != "assistant":
            continue
        for name, arguments in msg.tool_calls_of(m):
            if name == "report_location" and isinstance(arguments, dict):
                return arguments
    return None


def verify(task: CodingTask, messages: list[dict[str, Any]]) -> Verdict:
    """1.0 for the right file and function, FILE_ONLY_CREDIT for the file alone, else 0."""
    report = first_report(messages)
    file = str(report.get("file", "")).strip().lstrip("./") if report else ""
    name = str(report.get("function", "")).strip() if report else ""
    file_ok = file == task.bug_file
    function_ok = file_ok and name.removesuffix("()") == task.bug_function
    score = 1.0 if function_ok else FILE_ONLY_CREDIT if file_ok else 0.0
    return Verdict(score, (
        Check("reported", report is not None, 0.0, "" if report else "no report_location call"),
        Check("file", file_ok, FILE_ONLY_CREDIT, f"reported {file!r}"),
        Check("function", function_ok, 1.0 - FILE_ONLY_CREDIT, f"reported {name!r}"),
    ))


def oracle(task: CodingTask, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Search for the buggy function's definition, then report it."""
    if not any(name == "search" for m in messages if m.get("role") == "assistant"
               for name, _ in msg.tool_calls_of(m)):
        return {"name": "search", "arguments": {"query": f"def {task.bug_function}("}}
    return {"name": "report_location", "arguments": {"file": task.bug_file, "function": task.bug_function}}


class CodeLocalizationEnv(CodingEpisodeEnv):
    """trace/code_localization-v0 (see the module docstring)."""

    CAPABILITY = CAPABILITY
    CAPABILITIES = (CAPABILITY,)
    TOOLSET = LOCALIZATION_TOOLS
    CONFIG = LocalizationConfig
    INSTRUCTIONS = INSTRUCTIONS
    HINT = HINT
    AWAY_SHARE = ONE_CALL_AWAY
    END_TOOL = "report_location"
    END_REASON = "reported"

    def verify(self, task: Any, initial_world: Any, final_world: Any, messages: list[msg.Message]) -> Verdict:
        """The report's verdict (a pure function of the task and the conversation)."""
        return verify(task, messages)

    def oracle_action(self, messages: list[msg.Message]) -> Any:
        """The oracle's next turn."""
        return oracle(self.episode.task, messages)
