"""code_v0's mutants (pettingllm_envs.code.mutants) and what they decide: which tester tests
earn credit (those that kill plausible wrong programs, more credit for more kills) and when
a test the coder was shown counts as really passed (a hidden test fixed too)."""

from __future__ import annotations

import ast
import copy

import pytest
from code_problems import fresh_problem

from pettingllm_envs.code.code_env import JudgeLimits, judge_many
from pettingllm_envs.code.datasets import humaneval
from pettingllm_envs.code.mutants import MAX_MUTANTS, Mutator, kill_credit, mutant_sources, problem_mutants

ADD = "HumanEval/53"  # add(x, y): return x + y
FLIP = "HumanEval/27"  # flip_case(string): return string.swapcase()
#: Problems with loops, comparisons and helpers, to exercise every kind of site.
SAMPLE = ("HumanEval/0", "HumanEval/10", "HumanEval/27", "HumanEval/53", "HumanEval/120")


def fence(code: str) -> str:
    return f"```python\n{code}\n```"


fresh = fresh_problem


def test_every_site_kind_mutates_and_a_docstring_never_does():
    source = '''
def f(xs, s):
    """Doc."""
    total = 0
    for x in xs:
        if x > 1 and not x == 3:
            total += x * 2
    return max(total, -1), s.upper(), "a", True
'''
    tree = ast.parse(source)
    counter = Mutator()
    counter.visit(copy.deepcopy(tree))
    mutants = {ast.unparse(Mutator(site).visit(copy.deepcopy(tree))) for site in range(counter.sites)}
    original = ast.unparse(tree)
    assert original not in mutants and all('"""Doc."""' in m for m in mutants)
    for fragment in ("x >= 1", "x < 1", "x > 1 or", "x != 3", "x // 2", "x + 2", "total -= x", "min(total",
                     "s.lower()", "x > 2", "'', True", "False", "break", "return xs", "s, 'a'", "if not"):
        assert any(fragment in m for m in mutants), fragment


@pytest.mark.parametrize("problem_id", SAMPLE)
def test_mutants_are_seeded_plausible_wrong_programs(problem_id):
    problem = humaneval().get(problem_id)
    mutants = mutant_sources(problem)
    assert 1 <= len(mutants) <= MAX_MUTANTS and mutant_sources(problem) == mutants  # deterministic
    assert problem.reference not in mutants
    for mutant in mutants:  # none is equivalent on the hidden tests (nor wrong only by crashing: see the attacks)
        passed = [o.passed for o in judge_many(problem, [(mutant, t) for t in problem.tests], JudgeLimits(timeout=2.0))]
        assert not all(passed), mutant


def test_mutants_are_computed_once_per_problem_and_shared_by_copies():
    problem = humaneval().get(FLIP)
    assert problem_mutants(problem) is problem_mutants(problem)
    env = fresh(FLIP)
    clone = copy.deepcopy(env)
    assert not any(isinstance(v, tuple) and v == problem_mutants(problem) for v in vars(clone).values())


def test_credit_grows_with_the_share_of_mutants_a_test_kills():
    assert kill_credit(0, 6) == 0.0 and kill_credit(1, 6) == 0.5 and kill_credit(2, 6) == kill_credit(6, 6) == 1.0
    env = fresh(ADD)
    env.step(fence("def add(x, y):\n    return x + y"))
    weak, strong = copy.deepcopy(env), copy.deepcopy(env)
    weak.step(fence("assert add(0, 0) == 0"))  # x - y, x * y, an early `return x` pass it too
    strong.step(fence("assert add(2, 3) == 5"))
    assert weak.infos["tester"]["last_action"]["parsed"]["valid"] == 0
    assert weak.infos["tester"]["last_action"]["parsed"]["kills_no_mutant"] == 1
    assert "plausible wrong versions of the function pass too" in weak.observe("tester")
    assert strong.infos["tester"]["last_action"]["reward_local"] == pytest.approx(1.0)
    assert weak.infos["tester"]["last_action"]["reward_local"] == 0.0


def test_a_shown_failure_counts_as_fixed_only_with_a_hidden_test_fixed_too():
    """The coder sees the call and the expected value of each valid test it fails; matching
    those alone (no hidden test passes that the failing code failed) is not a fix."""
    env = fresh(ADD, alpha=0.0)
    env.step(fence("def add(x, y):\n    return x - y"))
    env.step(fence("assert add(6, 1) == 7\nassert add(4, 4) == 8"))
    assert len(env.caught) == 2
    table = copy.deepcopy(env)
    table.step(fence("def add(x, y):\n    return {(6, 1): 7, (4, 4): 8}.get((x, y), x - y)"))
    assert table.infos["coder"]["last_action"]["parsed"]["tests_passed"] == 2
    assert table.local_state("coder") == 0.0 and not any(table.terminations.values())
    fixed = copy.deepcopy(env)
    fixed.step(fence("def add(x, y):\n    return x + y"))
    assert fixed.local_state("coder") == 1.0 and all(fixed.terminations.values())
