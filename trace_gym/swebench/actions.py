"""What a SWE-bench agent did: its patch's files, its actions' effects on the repository
(a shell command read for the programs it runs and the files it writes), and the two
informational checks the programmatic labeller reads, `localized` and `reproduced`
(see `trace_gym.swebench`).
"""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from trace_gym.verdict import Check

RUNNERS = re.compile(r"python[0-9.]*|pytest|py\.test|tox|nosetests")
RUN_TOOLS = frozenset({"run_tests", "run"})
CREATES = frozenset({"create", "write"})
MODIFIES = frozenset({"str_replace", "insert", "edit", "append", "undo_edit", ""})
_WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "exec", "command", "timeout"})
_SEPARATOR = re.compile(r"^[;&|()\n]+$")
_REDIRECTS = {">": "create", ">|": "create", "&>": "create", ">>": "modify", "&>>": "modify"}
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")



# -- patches ---------------------------------------------------------------------------------------

_DIFF_GIT = re.compile(r"^diff --git a/(.+?) b/(.+)$")


def patch_files(patch: str | None) -> dict[str, str]:
    """The files a unified diff changes: path -> "modified", "added" or "deleted"."""
    files: dict[str, str] = {}
    current: str | None = None
    git = False
    for raw in (patch or "").splitlines():
        line = raw.rstrip("\r")
        m = _DIFF_GIT.match(line)
        if m:
            git, current = True, m.group(2)
            files[current] = "modified"
        elif current is not None and (line.startswith("new file mode") or line == "--- /dev/null"):
            files[current] = "added"
        elif current is not None and (line.startswith("deleted file mode") or line == "+++ /dev/null"):
            files[current] = "deleted"
        elif not git and line.startswith("+++ b/"):
            files[line[len("+++ b/"):].split("\t")[0]] = "modified"
    return files


def _same_file(path: str, repo_path: str) -> bool:
    """Whether a path the agent named (absolute, or relative to where it worked) is the
    repository's `repo_path`."""
    p = path.strip().strip("'\"")
    while p.startswith("./"):
        p = p[2:]
    return bool(p) and (p == repo_path or p.endswith("/" + repo_path) or
                        (not p.startswith("/") and repo_path.endswith("/" + p)))


def _is_test_file(path: str) -> bool:
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    return (bool({"tests", "test"} & set(parts[:-1])) or name == "conftest.py"
            or (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py"))


# -- what the agent did ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Action:
    """One thing the agent did, reduced to what the `reproduced` check reads."""

    tool: str
    """The tool or command name ("bash" for a shell command)."""
    command: str = ""
    """The shell text, for an action that ran a shell command."""
    path: str = ""
    """The file an editor action names."""
    edit: str = ""
    """"create" (writes a whole file), "modify" (changes part of one) or "" (no edit)."""


@dataclass(frozen=True)
class Effect:
    """What an action does, in order: runs code, or writes a file."""

    kind: str
    """"run", "create" or "modify"."""
    path: str = ""
    """The file written ("" when unknown)."""
    text: str = ""
    """The command or tool that did it, for the check's detail."""


def _heredoc_free(command: str) -> str:
    """The command without the bodies of its here-documents (text, not commands)."""
    out, end = [], None
    for line in command.split("\n"):
        if end is not None:
            if line.strip() == end:
                end = None
            continue
        out.append(line)
        m = _HEREDOC.search(line)
        if m:
            end = m.group(2)
    return "\n".join(out)


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: words split on white space, no operators
        return text.split()


def _segments(command: str) -> list[list[str]]:
    """The simple commands of a shell command line, as token lists."""
    segments: list[list[str]] = [[]]
    for token in _tokens(_heredoc_free(command)):
        if _SEPARATOR.match(token):
            segments.append([])
        else:
            segments[-1].append(token)
    return [s for s in segments if s]


def _program(tokens: list[str]) -> list[str]:
    """The tokens from the program name on (assignments and wrappers such as sudo skipped)."""
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if _ASSIGNMENT.match(t):
            i += 1
        elif t in _WRAPPERS:
            i += 1
            if t == "timeout":
                while i < len(tokens) and tokens[i].startswith("-"):
                    i += 1
                i += 1  # the duration
        else:
            break
    return tokens[i:]


def _runs_code(tokens: list[str]) -> bool:
    words = _program(tokens)
    if not words:
        return False
    name = PurePosixPath(words[0]).name
    if RUNNERS.fullmatch(name):
        return not (name.startswith("python") and words[1:3] == ["-m", "pip"])
    return words[0].startswith("./") and len(words[0]) > 2


def _sed_targets(words: list[str]) -> list[str] | None:
    """The files a `sed -i` edits, or None when it is no in-place sed."""
    if not words or PurePosixPath(words[0]).name != "sed":
        return None
    args = words[1:]
    if not any(a == "--in-place" or a.startswith("--in-place=") or re.match(r"^-[A-Za-z]*i", a) for a in args):
        return None
    script_given, files, skip = False, [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-e", "-f", "--expression", "--file"):
            script_given, skip = True, True
        elif a.startswith(("--expression=", "--file=")):
            script_given = True
        elif a.startswith("-") and a != "-":
            continue
        elif not script_given:
            script_given = True  # the script itself
        else:
            files.append(a)
    return files


def shell_effects(command: str) -> list[Effect]:
    """What a shell command line does that the `reproduced` check reads, in order: code it
    runs, in-place seds, redirects into .py files."""
    out: list[Effect] = []
    for tokens in _segments(command):
        text = " ".join(tokens)[:120]
        if _runs_code(tokens):
            out.append(Effect("run", "", text))
        targets = _sed_targets(_program(tokens))
        for target in targets or []:
            out.append(Effect("modify", target, text))
        for op, target in itertools.pairwise(tokens):
            if op in _REDIRECTS and target.endswith(".py"):
                out.append(Effect(_REDIRECTS[op], target, text))
    return out


def effects(action: Action) -> list[Effect]:
    """What one action does that the `reproduced` check reads."""
    if action.command:
        return shell_effects(action.command)
    if action.edit:
        return [Effect(action.edit, action.path, f"{action.tool} {action.path}".strip())]
    if action.tool in RUN_TOOLS:
        return [Effect("run", "", action.tool)]
    return []


def localized_check(patch: str | None, gold: str | None) -> Check | None:
    """`localized`: the agent's patch changes every file of the gold patch; None when no gold
    patch is known."""
    needed = set(patch_files(gold)) if gold is not None else set()
    if not needed:
        return None
    missing = sorted(needed - set(patch_files(patch)))
    detail = (f"the patch changes every file of the fix ({', '.join(sorted(needed))})" if not missing
              else f"the patch leaves out {', '.join(missing)}")
    return Check("localized", not missing, 0.0, detail)


def reproduced_check(actions: Iterable[Action], repo_files: Iterable[str] = ()) -> Check:
    """`reproduced`: the agent ran code before its first edit of the code (the module docstring's
    rule). `repo_files`: files known to exist in the repository or to belong to the fix (an
    edit of one is always an edit of the code)."""
    repo = list(repo_files)
    scratch: list[str] = []
    ran: Effect | None = None
    for action in actions:
        for effect in effects(action):
            if effect.kind == "run":
                ran = ran or effect
                continue
            path = effect.path
            own = bool(path) and not any(_same_file(path, r) for r in repo) and (
                _is_test_file(path) or effect.kind == "create" or any(_same_file(path, s) for s in scratch))
            if own:
                if effect.kind == "create":
                    scratch.append(path)
                continue
            where = path or "a file"
            if ran:
                return Check("reproduced", True, 0.0, f"ran `{ran.text}` before the first edit ({where})")
            return Check("reproduced", False, 0.0, f"no code was run before the first edit ({where})")
    if ran:
        return Check("reproduced", True, 0.0, f"ran `{ran.text}`; no edit of the code")
    return Check("reproduced", False, 0.0, "no code was run, and no edit of the code made")


