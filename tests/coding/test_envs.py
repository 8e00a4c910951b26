"""The coding envs end to end: oracles, adversaries, verifiers and tools (sandbox needed)."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import trace_gym  # noqa: F401  (registers the envs)
from trace_gym.coding import DOMAIN
from trace_gym.coding.verify import hidden_outcomes, package_files
from trace_gym.sandbox.jail import python_argv, sandbox_available
from trace_gym.sandbox.workspace import run
from trace_gym.seeding import SPLITS
from trace_gym.testing.adversaries import fit_seeds
from trace_gym.testing.coding import ADVERSARIES, FIX_BOUNDED, LOCALIZATION_BOUNDED, _special_case, learnt_patches
from trace_gym.testing.policies import oracle, play

pytestmark = pytest.mark.skipif(not sandbox_available()[0], reason=f"no sandbox: {sandbox_available()[1]}")
ENVS = (DOMAIN.target_env_id, *DOMAIN.capability_env_ids)
SEEDS = [0, 1, 2, 3, 4, SPLITS["test"].start, SPLITS["test"].start + 1, SPLITS["test"].start + 2]


@pytest.fixture(scope="module")
def envs():
    return {env_id: gym.make(env_id).unwrapped for env_id in ENVS}


@pytest.mark.parametrize("env_id", ENVS)
def test_the_oracle_scores_one_on_train_and_test_seeds_hinted_or_not(envs, env_id):
    env = envs[env_id]
    for i, seed in enumerate(SEEDS):
        reward, _, info = play(env, seed, oracle, hint=bool(i % 2))
        assert reward == 1.0, (seed, info["verdict"])


@pytest.mark.parametrize(("env_id", "name"), [(e, n) for e, advs in ADVERSARIES.items() for n in advs])
def test_every_adversary_scores_zero(envs, env_id, name):
    env, policy = envs[env_id], ADVERSARIES[env_id][name]
    for seed in SEEDS[::2]:
        reward, _, info = play(env, seed, policy)
        assert reward == 0.0, (seed, info["verdict"])


@pytest.mark.parametrize("name", sorted(LOCALIZATION_BOUNDED))
def test_reading_the_call_graph_earns_at_most_its_bound(envs, name):
    policy, bound = LOCALIZATION_BOUNDED[name]
    rewards = [play(envs["trace/code_localization-v0"], seed, policy)[0] for seed in range(200)]
    assert 0.3 < sum(rewards) / len(rewards) <= bound  # the bug is in the issue's function or under it, half and half


def test_a_table_of_fixes_learnt_on_train_seeds_fixes_those_and_few_others(envs):
    env = envs[DOMAIN.target_env_id]
    policy, bound = FIX_BOUNDED["learnt_patches"]
    assert len(learnt_patches(env)) > 100
    # it does memorise (knob bugs put inverse entries in the table, which undo each other)
    assert sum(play(env, seed, policy)[0] for seed in fit_seeds(env)[:10]) >= 3
    rewards = [play(env, seed, policy)[0] for seed in [*range(20), *range(SPLITS["test"].start, SPLITS["test"].start + 20)]]
    assert sum(rewards) / len(rewards) <= bound


def test_the_reproduction_decoy_is_the_fix_with_a_bug_of_its_own_written_in_place(envs):
    from trace_gym.coding.repo import load, module_sources, outcome, same_outcome
    from trace_gym.coding.repo import second_bug

    env = envs["trace/issue_reproduction-v0"]
    # 59 and 125: the issue's call expects None (an absent item), which only a near return of 0 differs from
    for seed in [*range(25), 59, 125, *range(SPLITS["test"].start, SPLITS["test"].start + 25)]:
        env.reset(seed=seed)
        task = env.task
        decoy, fixed = second_bug(task), task.fixed_files
        assert decoy is not None, seed
        changed = [p for p in fixed if decoy[p] != fixed[p]]
        assert len(changed) == 1 and "_Decoy" not in decoy[changed[0]], seed  # one module, no appended redefinition
        call = [task.api_module, task.api_function]
        got = outcome(getattr(load(task.package, module_sources(task.package, decoy))[call[0]], call[1]),
                      task.snippet_args)
        reported = outcome(getattr(load(task.package, module_sources(task.package, task.files))[call[0]], call[1]),
                           task.snippet_args)
        assert "value" in got, seed  # a value: "not the reported output" passes on it
        assert not same_outcome(got, task.snippet_expected) and not same_outcome(got, reported), seed


def test_where_the_issue_expects_none_the_decoy_still_defeats_the_adversaries_that_read_how_it_was_made(envs):
    # seeds 59 and 125 expect None (an absent item): the decoy had fallen back to appended
    # redefinitions there, which these adversaries recognise (1.0 in benchmarks/coding_integrity.py)
    env_id = "trace/issue_reproduction-v0"
    env = envs[env_id]
    for seed in (59, 125):
        assert play(env, seed, oracle)[0] == 1.0, seed
        for name in ("changed_and_no_redefinition", "changed_and_plain_value", "not_the_reported_output"):
            reward, _, info = play(env, seed, ADVERSARIES[env_id][name])
            assert reward == 0.0, (seed, name, info["verdict"])


def test_the_hidden_f2p_tests_fail_on_the_unfixed_package_and_pass_on_the_fixed(envs):
    env = envs[DOMAIN.target_env_id]
    for seed in SEEDS:
        env.reset(seed=seed)
        task = env.task
        buggy, _ = hidden_outcomes(task, task.files)
        fixed, _ = hidden_outcomes(task, task.fixed_files)
        for test, got_buggy, got_fixed in zip(task.hidden_tests, buggy, fixed):
            assert got_fixed == test.expected or json.dumps(got_fixed) == json.dumps(test.expected)
            assert (got_buggy == test.expected) == (test.group == "p2p"), (seed, test, got_buggy)


def test_special_casing_the_snippet_does_make_the_snippet_pass(envs):
    """The adversary works as meant: the snippet now gives the expected value; only the
    hidden tests' other inputs catch it."""
    env = envs[DOMAIN.target_env_id]
    env.reset(seed=3)
    task = env.task.to_json()
    env.step(_special_case(task)[0])
    files = env.episode.world.files
    result, _, _ = run(files, python_argv("-c", f"import sys; sys.path.append('/repo'); import json, {task['package']} as p; "
                                                f"print(json.dumps(p.{task['api_function']}(*{task['snippet_args']!r})))"))
    assert "value" in task["snippet_expected"] and json.loads(result.stdout) == task["snippet_expected"]["value"]
    assert env.step({"name": "submit", "arguments": {}})[1] == 0.0


def test_forged_result_lines_reach_the_verifier_and_are_refused(envs):
    env = envs[DOMAIN.target_env_id]
    env.reset(seed=5)
    task = env.task
    forged = dict(task.files)
    init = f"{task.package}/__init__.py"
    claim = json.dumps({"value": task.hidden_tests[0].expected.get("value")})
    forged[init] = (f"import json\nfor i in range(64):\n    print(chr(30) + json.dumps({{'i': i, **json.loads({claim!r})}}))\n"
                    + forged[init])
    outcomes, _ = hidden_outcomes(task, forged)
    assert outcomes[0] is None  # the forged line and the runner's own: two results, none believed


def test_only_the_package_is_copied_for_the_hidden_tests(envs):
    env = envs[DOMAIN.target_env_id]
    env.reset(seed=6)
    task = env.task
    files = {**task.fixed_files, "conftest.py": "raise SystemExit(3)\n", "sitecustomize.py": "raise SystemExit(3)\n",
             f"{task.package}/data.txt": "x"}
    assert set(package_files(task, files)) == {p for p in task.files if p.startswith(task.package + "/")}
    outcomes, _ = hidden_outcomes(task, files)
    assert all(o is not None for o in outcomes)


def test_tools_refuse_paths_outside_the_repository_and_bad_ranges(envs):
    env = envs[DOMAIN.target_env_id]
    env.reset(seed=0)
    for call in ({"name": "open_file", "arguments": {"path": "../etc/passwd"}},
                 {"name": "open_file", "arguments": {"path": "/etc/passwd"}},
                 {"name": "edit_file", "arguments": {"path": "README.md", "start_line": 50, "end_line": 60,
                                                     "new_text": "x"}},
                 {"name": "create_file", "arguments": {"path": "..", "content": "x"}},
                 {"name": "search", "arguments": {"query": ""}},
                 {"name": "run_command", "arguments": {"command": "  "}}):
        obs, reward, terminated, truncated, _ = env.step(call)
        assert obs[-1]["content"].startswith("Error:"), (call, obs[-1]["content"])
        assert not terminated and not truncated


def test_a_command_changes_the_repository_and_a_runaway_one_changes_nothing(envs):
    env = envs[DOMAIN.target_env_id]
    env.reset(seed=0)
    obs = env.step({"name": "run_command", "arguments": {"command": "echo hi > note.txt && ln -s /etc/passwd link"}})[0]
    files = env.episode.world.files
    assert files["note.txt"] == "hi\n" and "link" not in files and "not kept" in obs[-1]["content"]
    before = dict(files)
    obs = env.step({"name": "run_command", "arguments": {
        "command": "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do head -c 1000000 /dev/zero > f$i; done"}})[0]
    assert env.episode.world.files == before and "discarded" in obs[-1]["content"]


def test_the_visible_tests_pass_before_the_fix(envs):
    env = envs[DOMAIN.target_env_id]
    env.reset(seed=2)
    obs = env.step({"name": "run_tests", "arguments": {}})[0]
    assert "0 failed" in obs[-1]["content"] and "exit status 0" in obs[-1]["content"].lower()


def test_the_verdict_says_where_the_bug_was_and_whether_code_ran_first(envs):
    env = envs[DOMAIN.target_env_id]
    _, _, info = play(env, 0, oracle)
    checks = {c["name"]: c["passed"] for c in info["verdict"]["checks"]}
    assert checks["localized"] and checks["reproduced"]
    _, _, info = play(env, 0, ADVERSARIES[DOMAIN.target_env_id]["do_nothing"])
    checks = {c["name"]: c["passed"] for c in info["verdict"]["checks"]}
    assert not checks["localized"] and not checks["reproduced"]
    assert sum(1 for name in checks if name.startswith("f2p:")) == 3


def test_reproduced_means_the_code_ran_before_the_first_edit_of_the_package(envs):
    env = envs[DOMAIN.target_env_id]
    env.reset(seed=0)
    task = env.task
    from trace_gym.coding.verify import process_checks
    from trace_gym.coding.workspace import Repo

    def calls(*pairs):
        return [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}]}
            for i, (n, a) in enumerate(pairs)]

    edit = ("edit_file", {"path": task.bug_file, "start_line": 1, "end_line": 1, "new_text": "x"})
    scratch = ("create_file", {"path": "reproduce.py", "content": f"from {task.package} import *"})
    idle = ("create_file", {"path": "idle.py", "content": "print('nothing of the package')"})
    refused = ("create_file", {"path": "reproduce.py", "content": None})  # the tool refuses it: the file stays
    repo = Repo(dict(task.files))

    def command(text):
        return ("run_command", {"command": text})

    for conversation, ran in ((calls(command("ls -la"), edit), False),
                              (calls(scratch, command("python reproduce.py"), edit), True),
                              (calls(command("python -c pass"), edit), False),
                              (calls(command("python3 -c 'print(1)' && true"), edit), False),
                              (calls(idle, command("python idle.py"), edit), False),
                              (calls(scratch, refused, command("python reproduce.py"), edit), True),
                              (calls(command(f"python -c 'import {task.package}'"), edit), True),
                              (calls(command("python -m pytest -q tests"), edit), True),
                              (calls(("run_tests", {}), edit), True),
                              (calls(edit, ("run_tests", {})), False)):
        checks = {c.name: c.passed for c in process_checks(task, repo, repo, conversation)}
        assert checks["reproduced"] is ran, conversation


def test_an_exception_class_of_the_package_is_not_taken_for_the_builtin_of_its_name(envs):
    env = envs[DOMAIN.target_env_id]
    env.reset(seed=0)
    task = env.task
    shadow = {**task.fixed_files, f"{task.package}/trap.py":
              "class ValueError(Exception):\n    pass\n\n\ndef f():\n    raise ValueError('x')\n\n\ndef g():\n"
              "    raise KeyError('y')\n"}
    from trace_gym.coding.repo import HiddenTest
    tests = (HiddenTest("own", "f2p", "trap", "f", [], {"raises": "ValueError"}),
             HiddenTest("builtin", "f2p", "trap", "g", [], {"raises": "KeyError"}))
    outcomes, _ = hidden_outcomes(task, shadow, tests)
    assert outcomes == [{"raises": f"{task.package}.trap.ValueError"}, {"raises": "KeyError"}]


def test_odd_names_deep_folders_and_folder_bombs_are_not_kept_and_nothing_raises(envs):
    env = envs[DOMAIN.target_env_id]
    env.reset(seed=1)
    before = dict(env.episode.world.files)
    obs = env.step({"name": "run_command", "arguments": {"command": (
        "touch \"$(printf 'x\\377.txt')\" \"$(printf 'a\\nb.py')\"; "
        "python -c \"import os\nfor i in range(1500):\n    os.mkdir('d'); os.chdir('d')\"")}})[0]
    assert env.episode.world.files == before and "not kept" in obs[-1]["content"]
    obs = env.step({"name": "run_command", "arguments": {"command": "mkdir $(seq 1 3000)"}})[0]
    assert env.episode.world.files == before and "discarded" in obs[-1]["content"]
    obs = env.step({"name": "create_file", "arguments": {"path": f"{env.task.package}/__init__.py/x.py",
                                                          "content": "x = 1\n"}})[0]
    assert obs[-1]["content"].startswith("Error:")
    assert env.step({"name": "submit", "arguments": {}})[1] == 0.0


def test_a_name_longer_than_a_file_system_takes_is_refused(envs):
    env = envs[DOMAIN.target_env_id]
    env.reset(seed=0)
    for name in ("a" * 256 + ".py", "\N{GRINNING FACE}" * 70 + ".py"):
        obs = env.step({"name": "create_file", "arguments": {"path": f"{env.task.package}/{name}", "content": "x"}})[0]
        assert obs[-1]["content"].startswith("Error:")
    assert env.step({"name": "submit", "arguments": {}})[1] == 0.0  # and the verifier still runs


DEEP = 30_000
PRINT_DEEP = (f"deep = '[' * {DEEP} + ']' * {DEEP}\n"
              "print(chr(30) + '{\"i\": 0, \"file\": \"tests/test_issue.py\", \"test\": \"t\", \"value\": ' + deep + '}')\n"
              "print(chr(30) + '{\"i\": 0, \"file\": \"tests/test_issue.py\", \"test\": \"t\", \"passed\": true, "
              "\"error\": ' + deep + '}')\n")


@pytest.mark.parametrize("env_id", [DOMAIN.target_env_id, "trace/issue_reproduction-v0"])
def test_a_result_line_nested_too_deep_voids_its_test_and_never_raises(envs, env_id):
    env = envs[env_id]
    env.reset(seed=7)
    task = env.task
    if env_id == DOMAIN.target_env_id:  # printed by the package when the hidden tests import it
        init = f"{task.package}/__init__.py"
        action = {"name": "create_file", "arguments": {"path": init, "content": PRINT_DEEP + task.files[init]}}
    else:  # printed by the agent's own test
        action = {"name": "create_file", "arguments": {"path": "tests/test_issue.py",
                                                       "content": PRINT_DEEP + "\ndef test_t():\n    pass\n"}}
    obs, reward, terminated, truncated, info = env.step(action)
    assert not terminated and "Error" not in obs[-1]["content"], obs[-1]["content"][:300]
    _, reward, terminated, _, info = env.step({"name": "submit", "arguments": {}})
    assert terminated and reward == 0.0, info["verdict"]
    assert len(json.dumps(info["verdict"])) < 20_000


def test_the_reading_tools_output_is_bounded_like_a_commands(envs):
    from trace_gym.coding.tools import OUTPUT_CHARS

    env = envs[DOMAIN.target_env_id]
    env.reset(seed=8)
    write = ("open('wide.py', 'w').write(('x = ' + chr(39) + 'y' * 80000 + chr(39) + chr(10)) * 3); "
             "open('many.py', 'w').write(''.join(f'z{i} = 1  # needle' + chr(10) for i in range(5000)))")
    obs, *_ = env.step({"name": "run_command", "arguments": {"command": f'python -c "{write}"'}})
    assert obs[-1]["content"].startswith("exit status 0"), obs[-1]["content"][:300]
    for action in ({"name": "open_file", "arguments": {"path": "wide.py"}},
                   {"name": "search", "arguments": {"query": "y"}},
                   {"name": "search", "arguments": {"query": "needle"}},
                   {"name": "open_file", "arguments": {"path": "many.py"}},
                   {"name": "open_file", "arguments": {"path": "x" * 100_000}},
                   {"name": "list_files", "arguments": {}}):
        obs, *_ = env.step(action)
        text = obs[-1]["content"]
        assert len(text) <= OUTPUT_CHARS + 100, (action["name"], len(text))
    obs, *_ = env.step({"name": "open_file", "arguments": {"path": "wide.py"}})
    assert "characters of this line dropped" in obs[-1]["content"]
    obs, *_ = env.step({"name": "open_file", "arguments": {"path": "x" * 100_000}})
    assert obs[-1]["content"].endswith("characters dropped]")


def test_the_blind_search_fixes_a_one_slip_bug_yet_no_generated_one(envs):
    from trace_gym.coding.mutate import one_edit_away
    from trace_gym.coding.repo import load, module_sources, outcome, same_outcome
    from trace_gym.testing.search import search_fix

    env = envs[DOMAIN.target_env_id]
    env.reset(seed=11)
    task = env.task.to_json()
    # Not vacuous: one generic slip in the correct package is found and undone from the snippet.
    fixed = env.task.fixed_files
    lines = fixed[task["bug_file"]].splitlines(keepends=True)
    import ast

    node = next(n for n in ast.parse(fixed[task["bug_file"]]).body
                if isinstance(n, ast.FunctionDef) and n.name == task["bug_function"])
    for tree in one_edit_away("".join(lines[node.lineno - 1:node.end_lineno])):
        slipped = {**fixed, task["bug_file"]: "".join(lines[:node.lineno - 1]) + ast.unparse(tree) + "\n"
                   + "".join(lines[node.end_lineno:])}
        try:
            modules = load(task["package"], module_sources(task["package"], slipped))
        except Exception:
            continue
        got = outcome(getattr(modules[task["api_module"]], task["api_function"]), task["snippet_args"])
        if not same_outcome(got, task["snippet_expected"]):
            break
    found = search_fix({**task, "files": slipped})
    assert found is not None
    modules = load(task["package"], module_sources(task["package"], {**slipped, found[0]: found[1]}))
    assert same_outcome(outcome(getattr(modules[task["api_module"]], task["api_function"]), task["snippet_args"]),
                        task["snippet_expected"])
    # On the generated bugs, what it finds (if anything) fails a hidden test.
    policy, bound = FIX_BOUNDED["mutation_search"]
    rewards = [play(env, seed, policy)[0] for seed in SEEDS]
    assert sum(rewards) / len(rewards) <= bound and max(rewards) == 0.0


def test_the_reproduction_decoy_changes_the_package_where_the_fix_does(envs):
    from trace_gym.coding.repo import load, module_sources, outcome, same_outcome, second_bug, visible_tests_pass

    env = envs["trace/issue_reproduction-v0"]
    where = 0
    for seed in SEEDS:
        env.reset(seed=seed)
        task = env.task
        decoy = second_bug(task)
        assert decoy is not None
        modules = load(task.package, module_sources(task.package, decoy))
        got = outcome(getattr(modules[task.api_module], task.api_function), task.snippet_args)
        assert "value" in got and not same_outcome(got, task.snippet_expected)
        before, after = task.files[task.bug_file].splitlines(), decoy[task.bug_file].splitlines()
        top = next(i for i, (a, b) in enumerate(zip(before + [None], after + [None])) if a != b)
        bottom = next(i for i, (a, b) in enumerate(zip(before[::-1] + [None], after[::-1] + [None])) if a != b)
        where += ({p for p in decoy if decoy[p] != task.files.get(p)} == {task.bug_file}
                  and top + 1 >= task.fix_start - 1 and len(before) - bottom <= task.fix_end + 1
                  and visible_tests_pass(task, modules))
    assert where >= 0.6 * len(SEEDS)


def test_a_test_that_only_checks_how_the_package_changed_earns_little_and_would_earn_on_the_old_decoy(envs, monkeypatch):
    from trace_gym.testing.coding import REPRODUCTION_BOUNDED

    env = envs["trace/issue_reproduction-v0"]
    policy, bound = REPRODUCTION_BOUNDED["snapshot_diff"]
    rewards = [play(env, seed, policy)[0] for seed in SEEDS]
    assert sum(rewards) / len(rewards) <= bound
    # A decoy that is a second change elsewhere (as the decoy of before was) lets it through.
    import sys

    def elsewhere(task):
        fixed = task.fixed_files
        other = next(p for p in sorted(fixed) if p.startswith(task.package + "/") and p != task.bug_file
                     and not p.endswith("__init__.py"))
        return {**fixed, other: fixed[other] + "\n\ndef spare_total(values):\n    return sum(values) + 1\n"}

    monkeypatch.setattr(sys.modules[type(env).__module__], "second_bug", elsewhere)
    rewards = [play(env, seed, policy)[0] for seed in SEEDS]
    assert sum(rewards) / len(rewards) >= 0.5
