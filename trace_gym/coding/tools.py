"""The coding tools, in the spirit of SWE-agent's interface: list files, open a file at a
line, search, edit a line range, create a file, run a command or the visible tests, submit.

Each is a `Tool` over a `Repo` (`trace_gym.coding.workspace`): reading tools read the
in-memory repository; `run_command` and `run_tests` run in the sandbox over a copy of it
and keep what they leave there; `submit` ends the episode (the env sees the call). Every
problem (a path outside the repository, a line range past the end, a command that hits a
limit) is an "Error: ..." the agent reads, never an exception.
"""

from __future__ import annotations

from typing import Any

from trace_gym.coding.workspace import Repo
from trace_gym.errors import ToolError
from trace_gym.sandbox.workspace import clean_path, run
from trace_gym.schema import function, integer, string
from trace_gym.tools import ToolKind, Toolset, tool

WINDOW = 40
"""Lines `open_file` shows."""
MAX_HITS = 40
"""Lines `search` shows."""
MAX_EDIT_CHARS = 20_000
"""Longest text one edit may put in."""
OUTPUT_CHARS = 32 << 10
"""The most characters any tool's result holds, as a command keeps 32 KiB of each stream."""
LINE_CHARS = 500
"""The most characters `open_file` and `search` show of one line."""


def _line(text: str) -> str:
    if len(text) <= LINE_CHARS:
        return text
    return f"{text[:LINE_CHARS]} [... {len(text) - LINE_CHARS} characters of this line dropped]"


def _existing(repo: Repo, path: str) -> str:
    clean = clean_path(path)
    if clean is None:
        raise ToolError(f"invalid path {path!r}: give a path inside the repository, such as 'README.md'")
    if clean not in repo.files:
        raise ToolError(f"no file {clean!r}; list_files shows the repository's files")
    return clean


@tool(ToolKind.READ, function(
    "list_files", "List the repository's files under a directory (default: all of them).",
    {"path": string("A directory of the repository, e.g. '.' or 'tests'.")}, required=[]))
def list_files(repo: Repo, path: str = ".") -> str:
    """The files under `path`, one per line."""
    clean = clean_path(path)
    if clean is None:
        raise ToolError(f"invalid path {path!r}: give a directory inside the repository, such as '.'")
    prefix = "" if clean == "." else clean.rstrip("/") + "/"
    found = sorted(p for p in repo.files if p.startswith(prefix))
    if not found:
        raise ToolError(f"no files under {clean!r}")
    return "\n".join(found)


@tool(ToolKind.READ, function(
    "open_file", f"Show {WINDOW} lines of a file, numbered, starting at a line (default 1).",
    {"path": string("The file's path in the repository."), "line": integer("The first line to show (1-based).")},
    required=["path"]))
def open_file(repo: Repo, path: str, line: int = 1) -> str:
    """A numbered window of the file."""
    clean = _existing(repo, path)
    lines = repo.files[clean].splitlines()
    if not lines:
        return f"[{clean}: empty]"
    if line < 1 or line > len(lines):
        raise ToolError(f"line {line} is outside {clean} (lines 1-{len(lines)})")
    end = min(len(lines), line + WINDOW - 1)
    body = "\n".join(f"{n:4d}| {_line(lines[n - 1])}" for n in range(line, end + 1))
    return f"[{clean}: lines {line}-{end} of {len(lines)}]\n{body}"


@tool(ToolKind.READ, function(
    "search", "Find the lines that contain a text (case-sensitive), in every file under a directory.",
    {"query": string("The text to find, e.g. 'def parse'."),
     "path": string("A directory or file of the repository (default: everything).")}, required=["query"]))
def search(repo: Repo, query: str, path: str = ".") -> str:
    """'path:line: text' for each matching line."""
    if not query:
        raise ToolError("query must not be empty")
    clean = clean_path(path)
    if clean is None:
        raise ToolError(f"invalid path {path!r}")
    prefix = "" if clean == "." else clean
    hits = []
    for p in sorted(repo.files):
        if prefix and p != prefix and not p.startswith(prefix.rstrip("/") + "/"):
            continue
        for n, text in enumerate(repo.files[p].splitlines(), 1):
            if query in text:
                hits.append(f"{p}:{n}: {_line(text.strip())}")
    if not hits:
        return f"no line contains {query!r}"
    more = f"\n[{len(hits) - MAX_HITS} more]" if len(hits) > MAX_HITS else ""
    return "\n".join(hits[:MAX_HITS]) + more


@tool(ToolKind.WRITE, function(
    "edit_file",
    "Replace lines start_line..end_line (inclusive) of a file with new text. To insert before a line, "
    "give end_line = start_line - 1; empty text deletes the lines.",
    {"path": string("The file's path in the repository."), "start_line": integer("First line to replace (1-based)."),
     "end_line": integer("Last line to replace."), "new_text": string("The new lines (keep the indentation).")}))
def edit_file(repo: Repo, path: str, start_line: int, end_line: int, new_text: str) -> str:
    """The edit applied; the changed region shown."""
    from trace_gym.coding.repo import apply_edit

    clean = _existing(repo, path)
    count = len(repo.files[clean].splitlines())
    if not 1 <= start_line <= count + 1 or not start_line - 1 <= end_line <= count:
        raise ToolError(f"invalid line range {start_line}-{end_line} for {clean} (lines 1-{count}); "
                        "to insert before line n give start_line=n, end_line=n-1")
    if len(new_text) > MAX_EDIT_CHARS:
        raise ToolError(f"new_text is {len(new_text)} characters; at most {MAX_EDIT_CHARS}")
    repo.files[clean] = apply_edit(repo.files[clean], start_line, end_line, new_text)
    shown = max(1, start_line - 2)
    return f"Edited {clean}.\n" + open_file.fn(repo, clean, min(shown, max(1, len(repo.files[clean].splitlines()))))


@tool(ToolKind.WRITE, function(
    "create_file", "Create a file (or replace a whole file) with the given text.",
    {"path": string("The new file's path in the repository, e.g. 'tests/test_issue.py'."),
     "content": string("The file's text.")}))
def create_file(repo: Repo, path: str, content: str) -> str:
    """The file written."""
    clean = clean_path(path)
    if clean is None or clean == "." or clean.endswith("/"):
        raise ToolError(f"invalid path {path!r}: give a file path inside the repository")
    if any(p.startswith(clean + "/") for p in repo.files):
        raise ToolError(f"{clean!r} is a directory")
    parents = [clean[:i] for i, ch in enumerate(clean) if ch == "/"]
    if any(parent in repo.files for parent in parents):
        raise ToolError(f"{clean!r} would put a file inside the file {next(q for q in parents if q in repo.files)!r}")
    if len(content) > MAX_EDIT_CHARS:
        raise ToolError(f"content is {len(content)} characters; at most {MAX_EDIT_CHARS}")
    repo.files[clean] = content
    return f"Wrote {clean} ({len(content.splitlines())} lines)."


def _run_and_keep(repo: Repo, argv: list[str]) -> str:
    result, after, notes = run(repo.files, argv)
    if after is not None:
        repo.files.clear()
        repo.files.update(after)
    return "\n".join([result.describe(), *notes])


@tool(ToolKind.GENERIC, function(
    "run_command",
    "Run a shell command in the repository (sandboxed: no network, about 10 s of CPU), e.g. "
    "\"python -c 'import pkg; print(pkg.f(1))'\". Files it writes stay in the repository.",
    {"command": string("The shell command.")}))
def run_command(repo: Repo, command: str) -> str:
    """The command's exit status and output."""
    if not command.strip():
        raise ToolError("command must not be empty")
    return _run_and_keep(repo, ["sh", "-c", command])


@tool(ToolKind.GENERIC, function(
    "run_tests", "Run the repository's test suite (python tests/run.py) and show what failed.", {}))
def run_tests(repo: Repo) -> str:
    """The visible suite's report."""
    if "tests/run.py" not in repo.files:
        raise ToolError("tests/run.py is gone; run_command can run the tests another way")
    return _run_and_keep(repo, ["python3", "tests/run.py"])


@tool(ToolKind.GENERIC, function(
    "submit", "Submit the repository as it is now; this ends the task.", {}))
def submit(repo: Repo) -> str:
    """Acknowledged; the env ends the episode."""
    return "Submitted."


TOOLS = Toolset([list_files, open_file, search, edit_file, create_file, run_command, run_tests, submit],
                max_chars=OUTPUT_CHARS)
"""Every coding tool, in the order the agent sees them."""
RUNS = frozenset({"run_command", "run_tests"})
"""The tools that run code."""
EDITS = frozenset({"edit_file", "create_file"})
"""The tools that change the repository's text directly."""


def tool_names(messages: list[dict[str, Any]]) -> list[str]:
    """The names of the tools called in `messages`, in order."""
    return [tc["function"]["name"] for m in messages if m.get("role") == "assistant"
            for tc in m.get("tool_calls") or []]
