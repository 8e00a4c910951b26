"""One SWE-bench run read from its source: a SWE-agent `.traj` file (`read_swe_agent`) or the
rows of an OpenHands `output.jsonl` (`read_openhands`), each against its project's public
code (see `trace_gym.swebench`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_gym.errors import MalformedFile
from trace_gym.jsondata import loads
from trace_gym.swebench.actions import CREATES, MODIFIES, Action
from trace_gym.swebench.report import _json_lines, _read_json

SWE_AGENT_TOOLS = frozenset({"str_replace_editor", "create", "edit", "insert", "append", "open", "goto",
                             "scroll_up", "scroll_down", "find_file", "search_dir", "search_file", "filemap",
                             "submit", "exit_forfeit", "view_image"})

# -- one run, read from its source -----------------------------------------------------------------

@dataclass
class Run:
    """One agent run on one SWE-bench instance, as read from its source file."""

    instance_id: str
    """The SWE-bench instance."""
    source: str
    """Where it was read (a file, with its line for a JSONL row)."""
    agent: str
    """The agent ("swe-agent", "openhands/CodeActAgent")."""
    model: str | None
    """The model, from the source's metadata."""
    messages: list[dict[str, Any]]
    """The conversation in the OpenAI wire format."""
    actions: list[Action]
    """What the agent did, in order."""
    patch: str | None
    """The agent's patch (its submission)."""
    gold_patch: str | None = None
    """The reference fix, when the source carries it."""
    instructions: str = ""
    """The issue text the agent was given."""
    termination_reason: str | None = None
    """Why the run ended."""
    total_s: float | None = None
    """Seconds the run took, when the source says."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else of the source worth keeping in the record."""


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text")
    return "" if content is None else str(content)


def _arguments(value: Any) -> str:
    """Tool-call arguments as a JSON object's text (text that is no object is kept under 'input')."""
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, str):
        try:
            if isinstance(loads(value), dict):
                return value
        except ValueError:
            pass
    return json.dumps({"input": value})


def _wire_call(call: Any, fallback_id: str) -> dict[str, Any] | None:
    if not isinstance(call, dict):
        return None
    fn = inner if isinstance(inner := call.get("function"), dict) else call
    name = fn.get("name")
    if not isinstance(name, str):
        return None
    call_id = given if isinstance(given := call.get("id"), str) else fallback_id
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": _arguments(fn.get("arguments"))}}


def _swe_agent_tool(action: str) -> str:
    word = action.strip().split(maxsplit=1)[0] if action.strip() else ""
    return word if word in SWE_AGENT_TOOLS else "bash"


def _state(step: dict[str, Any]) -> dict[str, Any]:
    state = step.get("state")
    if isinstance(state, str):
        try:
            state = loads(state)
        except ValueError:
            return {}
    return state if isinstance(state, dict) else {}


def _swe_agent_actions(steps: list[dict[str, Any]]) -> list[Action]:
    actions: list[Action] = []
    open_file = ""
    for step in steps:
        text = (step.get("action") or "").strip()
        if not text:
            continue
        state_file = _state(step).get("open_file")
        word, _, rest = text.partition(" ")
        word = word.split("\n")[0]
        args = rest.split()
        if word in ("open", "create") and args:
            target = args[0].strip("'\"")
            actions.append(Action(word, path=target, edit="create") if word == "create" else Action(word))
            open_file = target
        elif word in ("edit", "insert", "append"):
            target = state_file if isinstance(state_file, str) and state_file not in ("", "n/a") else open_file
            actions.append(Action(word, path=target, edit="modify"))
        elif word == "str_replace_editor" and len(args) >= 2:
            sub, target = args[0], args[1].strip("'\"")
            edit = "create" if sub in CREATES else "modify" if sub in MODIFIES - {""} else ""
            actions.append(Action(word, path=target if edit else "", edit=edit))
        elif word in SWE_AGENT_TOOLS:
            actions.append(Action(word))
        else:
            actions.append(Action("bash", command=text))
    return actions


def _swe_agent_model(data: dict[str, Any]) -> str | None:
    config = data.get("replay_config")
    if isinstance(config, str):
        try:
            config = loads(config)
        except ValueError:
            return None
    agent = (config or {}).get("agent") if isinstance(config, dict) else None
    if not isinstance(agent, dict):
        return None
    models = [agent.get("model")] + [c.get("model") for c in agent.get("agent_configs") or [] if isinstance(c, dict)]
    return next((m["name"] for m in models if isinstance(m, dict) and isinstance(m.get("name"), str)), None)


def _swe_agent_instructions(data: dict[str, Any], history: list[dict[str, Any]]) -> str:
    config = data.get("replay_config")
    if isinstance(config, str):
        try:
            config = loads(config)
        except ValueError:
            config = None
    statement = (config or {}).get("problem_statement") if isinstance(config, dict) else None
    if isinstance(statement, dict) and isinstance(statement.get("text"), str):
        return statement["text"]
    return next((_text(m.get("content")) for m in history if m.get("role") == "user" and not m.get("is_demo")), "")


def _swe_agent_messages(history: list[dict[str, Any]], steps: list[dict[str, Any]],
                        instructions: str) -> list[dict[str, Any]]:
    """The chat: SWE-agent's history as it is where it has function calls; else its head
    (system prompt, the issue) and one tool call per trajectory step."""
    live = [m for m in history if not m.get("is_demo")]
    if any(m.get("role") == "assistant" and m.get("tool_calls") for m in live):
        out: list[dict[str, Any]] = []
        for i, m in enumerate(live):
            role = m.get("role")
            if role == "assistant":
                calls = [c for j, tc in enumerate(m.get("tool_calls") or [])
                         if (c := _wire_call(tc, f"call_{i}_{j}")) is not None]
                msg: dict[str, Any] = {"role": "assistant", "content": _text(m.get("content"))}
                if calls:
                    msg["tool_calls"] = calls
                out.append(msg)
            elif role == "tool":
                ids = m.get("tool_call_ids") or [m.get("tool_call_id")]
                call_id = ids[0] if ids and isinstance(ids[0], str) else ""
                out.append({"role": "tool", "tool_call_id": call_id, "content": _text(m.get("content"))})
            elif role in ("system", "user"):
                out.append({"role": role, "content": _text(m.get("content"))})
        return out
    head: list[dict[str, Any]] = []
    for m in live:
        if m.get("role") not in ("system", "user"):
            break
        head.append({"role": m["role"], "content": _text(m.get("content"))})
    if not head and instructions:
        head = [{"role": "user", "content": instructions}]
    out = head
    for i, step in enumerate(steps):
        action = step.get("action") or ""
        thought = _text(step.get("thought") or step.get("response") or "")
        if not action.strip():
            out.append({"role": "assistant", "content": _text(step.get("response")) or thought})
            continue
        call_id = f"call_{i}_0"
        out.append({"role": "assistant", "content": thought, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": _swe_agent_tool(action), "arguments": json.dumps({"command": action})}}]})
        out.append({"role": "tool", "tool_call_id": call_id, "content": _text(step.get("observation"))})
    return out


def read_swe_agent(path: str | Path) -> Run:
    """One SWE-agent `.traj` file (the instance id is its name)."""
    path = Path(path)
    data = _read_json(path, "a SWE-agent trajectory (.traj)")
    if not isinstance(data, dict):
        raise MalformedFile(f"{path}: not a SWE-agent trajectory (expected a JSON object)")
    steps = data.get("trajectory")
    if not isinstance(steps, list):
        raise MalformedFile(f"{path}: not a SWE-agent trajectory: no 'trajectory' list of steps")
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise MalformedFile(f"{path}: trajectory[{i}] is not a step object")
        for key in ("action", "observation", "thought", "response"):
            if step.get(key) is not None and not isinstance(step[key], str):
                raise MalformedFile(f"{path}: trajectory[{i}].{key} must be a string")
    history = data.get("history", [])
    if history is None:
        history = []
    if not isinstance(history, list) or not all(isinstance(m, dict) for m in history):
        raise MalformedFile(f"{path}: 'history' must be a list of message objects")
    info = data.get("info", {}) or {}
    if not isinstance(info, dict):
        raise MalformedFile(f"{path}: 'info' must be an object")
    submission = info.get("submission")
    if submission is not None and not isinstance(submission, str):
        raise MalformedFile(f"{path}: info.submission must be the patch text or null")
    instructions = _swe_agent_instructions(data, history)
    times = [s.get("execution_time") for s in steps]
    total = sum(t for t in times if isinstance(t, (int, float))) if any(isinstance(t, (int, float)) for t in times) \
        else None
    exit_status = info.get("exit_status")
    return Run(
        instance_id=path.stem, source=str(path), agent="swe-agent", model=_swe_agent_model(data),
        messages=_swe_agent_messages(history, steps, instructions), actions=_swe_agent_actions(steps),
        patch=submission, instructions=instructions,
        termination_reason=str(exit_status) if exit_status is not None else None, total_s=total)


# OpenHands

_BOOKKEEPING = frozenset({"thought", "is_input", "blocking", "is_static", "cwd", "hidden", "confirmation_state",
                          "security_risk", "impl_source", "kernel_init_code", "include_extra", "wait_for_response",
                          "image_urls", "file_urls", "start", "end", "view_range", "content"})
_DEFAULT_TOOL = {"run": "execute_bash", "run_ipython": "execute_ipython_cell", "edit": "str_replace_editor",
                 "read": "str_replace_editor", "write": "str_replace_editor", "think": "think", "finish": "finish",
                 "browse": "browser", "browse_interactive": "browser", "call_tool_mcp": "mcp"}
_SKIPPED_ACTIONS = frozenset({"recall", "condensation", "condensation_request", "change_agent_state", "null",
                              "pause", "resume", "stop", "push", "send_pr", "task_tracking", "loop_recovery"})
_SKIPPED_OBSERVATIONS = frozenset({"recall", "agent_state_changed", "null", "condense", "user_rejected"})


def _model_arguments(metadata: dict[str, Any], call_id: str) -> str | None:
    """A tool call's arguments as the model wrote them (the metadata's model_response), when
    they are a JSON object."""
    response = metadata.get("model_response")
    choices = response.get("choices") if isinstance(response, dict) else None
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and call.get("id") == call_id and isinstance(fn.get("arguments"), str):
                try:
                    return fn["arguments"] if isinstance(loads(fn["arguments"]), dict) else None
                except ValueError:
                    return None
    return None


def _openhands_arguments(kind: str, args: dict[str, Any]) -> dict[str, Any]:
    if kind == "run":
        return {"command": args.get("command", "")}
    if kind == "run_ipython":
        return {"code": args.get("code", "")}
    if kind == "read":
        return {"command": "view", "path": args.get("path", "")}
    if kind == "finish":
        return {"message": args.get("final_thought") or args.get("outputs") or ""}
    if kind == "think":
        return {"thought": args.get("thought", "")}
    out = {k: v for k, v in args.items() if k not in _BOOKKEEPING and v is not None}
    if kind in ("edit", "write") and args.get("content"):
        out["content"] = args["content"]
    return out


def _openhands_action(kind: str, args: dict[str, Any], tool: str) -> Action | None:
    if kind == "run":
        return Action(tool, command=str(args.get("command") or ""))
    if kind == "edit":
        sub = str(args.get("command") or "")
        edit = "create" if sub in CREATES else "modify" if sub in MODIFIES else ""
        return Action(tool, path=str(args.get("path") or ""), edit=edit)
    if kind == "write":
        return Action(tool, path=str(args.get("path") or ""), edit="create")
    if kind in ("message", "system", "finish", "think", "read"):
        return None
    return Action(tool)


def _events(path: Path, number: int, history: list[Any]) -> list[dict[str, Any]]:
    """The events of a history, the older [action, observation] pairs flattened (the
    observation's cause set to its action where it has none)."""
    events: list[dict[str, Any]] = []
    for i, item in enumerate(history):
        pair = item if isinstance(item, list) else [item]
        if isinstance(item, list) and (len(item) != 2 or not all(isinstance(e, dict) for e in item)):
            raise MalformedFile(f"{path}: line {number}: history[{i}] is neither an event nor an "
                                "[action, observation] pair")
        for j, event in enumerate(pair):
            if not isinstance(event, dict) or not ("action" in event or "observation" in event):
                raise MalformedFile(f"{path}: line {number}: history[{i}] is not an event (an object with "
                                    "'action' or 'observation')")
            if "action" in event and not isinstance(event["action"], str):
                raise MalformedFile(f"{path}: line {number}: history[{i}].action must be a string")
            if isinstance(item, list):
                event = {**event, "_pair": i}
                if j == 1 and "cause" not in event:
                    event["_pair_cause"] = True
            events.append(event)
    return events


def _openhands_conversation(path: Path, number: int, history: list[Any]) -> tuple[list[dict[str, Any]], list[Action]]:
    messages: list[dict[str, Any]] = []
    actions: list[Action] = []
    call_of: dict[Any, str] = {}
    last_call: dict[int, str] = {}
    for k, event in enumerate(_events(path, number, history)):
        if "action" in event:
            kind: str = event["action"]  # a string: _events checks it
            args = given if isinstance(given := event.get("args"), dict) else {}
            if kind in _SKIPPED_ACTIONS:
                continue
            source = event.get("source")
            if kind == "system":
                messages.append({"role": "system", "content": _text(args.get("content") or event.get("message"))})
                continue
            if kind == "message":
                role = "user" if source == "user" else "assistant"
                messages.append({"role": role, "content": _text(args.get("content") or event.get("message"))})
                continue
            metadata = given if isinstance(given := event.get("tool_call_metadata"), dict) else {}
            tool = name if isinstance(name := metadata.get("function_name"), str) else \
                _DEFAULT_TOOL.get(kind, kind)
            call_id = named if isinstance(named := metadata.get("tool_call_id"), str) else \
                f"call_{event.get('id', k)}"
            if kind in ("finish", "think") and not metadata:
                text = args.get("final_thought") or args.get("thought") or event.get("message") or ""
                messages.append({"role": "assistant", "content": _text(text)})
                continue
            arguments = _model_arguments(metadata, call_id) or json.dumps(_openhands_arguments(kind, args))
            thought = args.get("thought")
            messages.append({"role": "assistant", "content": _text(thought) if thought else None, "tool_calls": [{
                "id": call_id, "type": "function", "function": {"name": tool, "arguments": arguments}}]})
            if "id" in event:
                call_of[event["id"]] = call_id
            if "_pair" in event:
                last_call[event["_pair"]] = call_id
            action = _openhands_action(kind, args, tool)
            if action is not None:
                actions.append(action)
        else:
            if event.get("observation") in _SKIPPED_OBSERVATIONS:
                continue
            answered = call_of.get(event.get("cause"))
            if answered is None and event.get("_pair_cause"):
                answered = last_call.get(event["_pair"])
            if answered is None:
                observed = event.get("tool_call_metadata")
                answered = observed.get("tool_call_id") if isinstance(observed, dict) else None
            if not isinstance(answered, str):
                continue  # an observation that answers no call the agent made
            messages.append({"role": "tool", "tool_call_id": answered, "content": _text(event.get("content"))})
    return messages, actions


def _openhands_termination(history_events: list[Any], error: Any) -> str | None:
    finished = any(isinstance(e, dict) and e.get("action") == "finish"
                   for item in history_events for e in (item if isinstance(item, list) else [item]))
    if finished:
        return "submitted"
    if isinstance(error, str) and error:
        return "max_steps" if "maximum iteration" in error else "error"
    return None


def read_openhands(path: str | Path) -> Iterator[Run]:
    """The runs of an OpenHands SWE-bench `output.jsonl` (one EvalOutput a line)."""
    path = Path(path)
    for number, row in _json_lines(path, "an OpenHands output.jsonl", "a JSON object (an OpenHands EvalOutput)"):
        instance_id = row.get("instance_id")
        if not isinstance(instance_id, str) or not instance_id:
            raise MalformedFile(f"{path}: line {number}: no 'instance_id'")
        history = row.get("history")
        if not isinstance(history, list):
            raise MalformedFile(f"{path}: line {number}: 'history' must be a list of events")
        test_result = row.get("test_result") or {}
        if not isinstance(test_result, dict):
            raise MalformedFile(f"{path}: line {number}: 'test_result' must be an object")
        patch = test_result.get("git_patch")
        if patch is not None and not isinstance(patch, str):
            raise MalformedFile(f"{path}: line {number}: test_result.git_patch must be the patch text or null")
        instance = given if isinstance(given := row.get("instance"), dict) else {}
        metadata = given if isinstance(given := row.get("metadata"), dict) else {}
        llm = given if isinstance(given := metadata.get("llm_config"), dict) else {}
        messages, actions = _openhands_conversation(path, number, history)
        gold = instance.get("patch")
        instructions = instance.get("problem_statement") or row.get("instruction") or ""
        agent_class = metadata.get("agent_class")
        extra = {"agent_error": row["error"]} if isinstance(row.get("error"), str) and row["error"] else {}
        yield Run(
            instance_id=instance_id, source=f"{path}:{number}",
            agent=f"openhands/{agent_class}" if isinstance(agent_class, str) else "openhands",
            model=model if isinstance(model := llm.get("model"), str) else None,
            messages=messages, actions=actions, patch=patch, gold_patch=gold if isinstance(gold, str) else None,
            instructions=_text(instructions), termination_reason=_openhands_termination(history, row.get("error")),
            extra=extra)


