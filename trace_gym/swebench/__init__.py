"""Import SWE-bench runs (SWE-agent trajectories, OpenHands output) into trace-gym trajectory records.

Sources, each read against its project's public code:

- SWE-agent `<instance_id>.traj` (JSON): SWE-agent/SWE-agent at 3ea751c0 (2026-07):
  `sweagent/types.py` (StepOutput, TrajectoryStep, HistoryItem, AgentInfo),
  `sweagent/agent/agents.py` (`get_trajectory_data`, `save_trajectory`,
  `add_step_to_history`, `_add_templated_messages_to_history`; the RetryAgent's
  `attempt_<n>/` copies), `docs/usage/trajectories.md`, and two stored files: the 1.x
  function-calling demo `trajectories/demonstrations/replay__marshmallow-code__marshmallow-1867__function_calling_replace__install-1/marshmallow-code__marshmallow-1867.traj`
  and the 0.x `tests/test_data/trajectories/gpt4__swe-bench-dev-easy_first_only__default__t-0.00__p-0.95__c-3.00__install-1/pydicom__pydicom-1458.traj`.
  A file holds `trajectory` (steps: `action`, `observation`, `response`, `thought`, `state`
  with `open_file`: a dict in 1.x, a JSON string in 0.x), `history` (the chat: `role`,
  `content` (text or a list of parts), in 1.x `message_type`, `action`, `tool_calls`
  (litellm's), `tool_call_ids` on tool messages, `is_demo` on demonstrations), `info`
  (`submission`: the patch, `exit_status`) and, from 1.x, `replay_config` (a dict, or the
  JSON text of one; `agent.model.name` is the model).
- OpenHands `output.jsonl`: All-Hands-AI/OpenHands at 156d0686 (2025-11):
  `evaluation/utils/shared.py` (EvalOutput: `instance_id`, `instruction`, `instance` (the
  dataset row: `patch`, `problem_statement`), `test_result.git_patch`, `metadata`
  (`agent_class`, `llm_config.model`), `history`, `error`),
  `evaluation/benchmarks/swe_bench/run_infer.py` (process_instance),
  `openhands/events/serialization/event.py` (`event_to_dict`: actions carry `action` and
  `args`, observations `observation`, `content`, `extras` and `cause`, the action's id; both
  `tool_call_metadata` with `function_name`, `tool_call_id` and the `model_response`),
  `openhands/events/action/{commands,files,message}.py`,
  `openhands/events/observation/{commands,files}.py`, `openhands/core/schema/*.py`,
  `openhands/agenthub/codeact_agent/function_calling.py` (execute_bash, str_replace_editor,
  edit_file, think, finish), and the stored rows of
  `evaluation/benchmarks/multi_swe_bench/examples/output.jsonl`. The older history of
  [action, observation] pairs is read too.
- The evaluation report: SWE-bench/SWE-bench at 7a21e057 (2026-08):
  `swebench/harness/grading.py` (`get_eval_report`: report.json is `{instance_id:
  {"patch_is_None", "patch_exists", "patch_successfully_applied", "resolved",
  "tests_status": {"FAIL_TO_PASS": {"success": [...], "failure": [...]}, "PASS_TO_PASS":
  ...}}}`) and `swebench/harness/reporting.py` (`make_run_report`, schema_version 2:
  `resolved_ids`, `unresolved_ids`, `empty_patch_ids`, `error_ids`, `incomplete_ids`,
  `infra_failure_ids`, ...). A directory is read as every `report.json` under it (the
  harness's `logs/run_evaluation/<run>/<model>/<instance>/report.json`).

Each run becomes one record of the shape `trace_gym.tau2` emits: id
`swebench/verified/<instance_id>/0`, env_id "swebench/verified", domain "coding", task_id
the instance id, policy `<agent>/<model>` and model (from the source's metadata, else None),
messages in the OpenAI wire format (every action an assistant tool call, its observation the
tool message answering it), reward 1 when the report says resolved, capabilities_needed
`capabilities.CODING`, termination_reason (SWE-agent's exit_status; OpenHands: "submitted"
after a finish action, "max_steps", "error"), and a verdict whose checks are the report's
tests (`f2p:<test>` / `p2p:<test>`, or one `resolved` check when the report lists none),
with the report's entry under `verdict.source`, plus two informational checks (credit 0)
the programmatic labeller reads:

- `localized`: the files the agent's patch changes include every file of the gold patch
  (the OpenHands row's `instance.patch`, or `--dataset`); left out when no gold patch is known;
- `reproduced`: the agent ran code (a `python`, `pytest`, `py.test`, `tox`, `nosetests` or
  `./script` command, `python -m pip` excepted, or a `run_tests` / `run` tool call) before
  its first edit of the code. An edit is a create / write / str_replace / insert / edit
  action, a `sed -i`, or a shell redirect into a .py file; writing the agent's own scratch
  files is not an edit of the code: a file it creates (a create or write action, a `>`
  redirect) that no patch changes as an existing file, later edits of that file, and edits
  of test files (under tests/ or test/, test_*.py, *_test.py, conftest.py). So the usual
  "create reproduce.py, run it, then fix" passes, as it must.

A malformed file is refused naming the file, the line or field, and why (`MalformedFile`); an
instance the report does not list is refused by name unless `skip_missing`.

The package: `report` (the evaluation report, a dataset), `actions` (what the agent did and
the two informational checks), `sources` (the SWE-agent and OpenHands readers) and `records`
(the records and the import).
"""

from trace_gym.swebench.actions import (
    CREATES,
    MODIFIES,
    RUN_TOOLS,
    RUNNERS,
    Action,
    Effect,
    effects,
    localized_check,
    patch_files,
    reproduced_check,
    shell_effects,
)
from trace_gym.swebench.records import (
    DOMAIN,
    ENV_ID,
    TASK_KIND,
    Imported,
    import_runs,
    read_runs,
    record,
    record_id,
    source_files,
    write_records,
)
from trace_gym.swebench.report import SUMMARY_FAILED, SUMMARY_LISTS, Outcome, Report, read_dataset, read_report
from trace_gym.swebench.sources import SWE_AGENT_TOOLS, Run, read_openhands, read_swe_agent

__all__ = ["Action", "CREATES", "DOMAIN", "ENV_ID", "Effect", "Imported", "MODIFIES", "Outcome", "RUNNERS", "RUN_TOOLS", "Report", "Run", "SUMMARY_FAILED", "SUMMARY_LISTS", "SWE_AGENT_TOOLS", "TASK_KIND", "effects", "import_runs", "localized_check", "patch_files", "read_dataset", "read_openhands", "read_report", "read_runs", "read_swe_agent", "record", "record_id", "reproduced_check", "shell_effects", "source_files", "write_records"]
