"""The envs' Demonstrations capability (plan_path_v0, sudoku_v0): the warm start's actions are
those of the committed experiment, worked out from the env's state; the tool's program prints
what its Python mirror predicts; the planner copies the tool; mistakes are well-formed and wrong."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import pickle
import random

import pytest
from repo_paths import TESTS

import pettingllm_envs
from benchmarks.learning.demonstrations import make_view, multi_agent_demonstrations, single_agent_demonstrations
from pettingllm_envs.capabilities import Demonstrations, capability
from pettingllm_envs.core.tool_demonstrations import printed_this_turn
from pettingllm_envs.games import sudoku_demonstrations
from pettingllm_envs.planning import plan_path_demonstrations

REFERENCE = json.loads((TESTS / "demonstrations_reference.json").read_text())
ORACLES = {"plan_path_v0": plan_path_demonstrations.ORACLE, "sudoku_v0": sudoku_demonstrations.ORACLE}
PLAN = {"rows": 4, "cols": 4, "max_turns": 2}
SUDOKU = {"size": 4, "givens": 14, "max_turns": 2}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REFERENCE["cases"]))
def test_demonstrations_are_those_of_the_committed_warm_starts(name):
    """Every demonstration of the committed experiment's warm starts (both envs, both views,
    the quick check's scripted tool) is byte-identical to what the prompt-parsing code made
    before the demonstrations moved into the envs (``demonstrations_reference.json``)."""
    case = REFERENCE["cases"][name]
    problems, rate = range(REFERENCE["problems"]), REFERENCE["mistake_rate"]
    if case["single_agent"]:
        demos = single_agent_demonstrations(case["env"], case["env_kwargs"], problems, rate, case["seed"], brief=True)
    else:
        demos = multi_agent_demonstrations(case["env"], case["env_kwargs"], problems, rate, case["seed"], brief=True,
                                           scripted=tuple(case["scripted"]))
    digests = [hashlib.sha256(json.dumps([d.policy_role, d.action, d.corrupted]).encode()).hexdigest()[:8]
               for d in demos]
    expected = case["actions"].split()
    first_change = next((i for i, (a, b) in enumerate(zip(digests, expected, strict=False)) if a != b), None)
    assert (len(digests), first_change) == (len(expected), None), demos[first_change or 0]
    assert sum(d.corrupted for d in demos) == case["corrupted"]
    assert hashlib.sha256(json.dumps([d.messages for d in demos]).encode()).hexdigest() == case["messages"]


@pytest.mark.slow
@pytest.mark.parametrize("env_id, kwargs", [("plan_path_v0", PLAN), ("sudoku_v0", {"size": 4, "max_turns": 2})])
def test_clean_demonstrations_solve_and_corrupted_ones_do_not(env_id, kwargs):
    """Demonstrations without mistakes solve every episode in one turn; at rate 1 every answer
    is wrong (well-formed, but no episode is solved in its first turn)."""
    clean = multi_agent_demonstrations(env_id, kwargs, range(20), 0.0, seed=0)
    assert len(clean) == 40 and not any(d.corrupted for d in clean)  # tool + planner, one turn each
    wrong = multi_agent_demonstrations(env_id, kwargs, range(20), 1.0, seed=0)
    assert all(d.corrupted for d in wrong) and len(wrong) == 80  # never solved: both turns played
    solo = single_agent_demonstrations(env_id, kwargs, range(20), 0.0, seed=0)
    assert len(solo) == 20 and all(d.action.startswith("### tool\n```python\n") for d in solo)


def test_corruption_changes_exactly_one_item():
    rng = random.Random(0)
    sudoku = pettingllm_envs.make("sudoku_v0", **SUDOKU)
    sudoku.reset(seed=0)
    for _ in range(50):
        moves = ["U", "R", "R", "D"]
        changed = plan_path_demonstrations.corrupt_moves(moves, rng, None)
        assert sum(a != b for a, b in zip(moves, changed, strict=True)) == 1
        triples = ["1 1 2", "2 3 4"]
        changed = sudoku_demonstrations.corrupt_triples(triples, rng, sudoku.unwrapped)
        assert sum(a != b for a, b in zip(triples, changed, strict=True)) == 1
        assert all(1 <= int(x) <= 4 for t in changed for x in t.split())


@pytest.mark.parametrize("env_id, kwargs", [("plan_path_v0", {"rows": 3, "cols": 3, "min_distance": 2,
                                                                  "max_turns": 2}), ("sudoku_v0", SUDOKU)])
def test_tool_program_copies_the_board_and_prints_what_its_python_mirror_says(env_id, kwargs):
    """The demonstrated tool program is the board copied verbatim plus a fixed solver (a BFS,
    or the digit missing from a cell's row and column). Run in the env's sandbox, it prints
    what the demonstrations' Python mirror of it predicts, clean (the solution) and mis-copied
    (one cell of the copy wrong: a wrong answer, or an error); checked on 24 boards each, so
    a mirror that drifted from the program would show."""
    answers = ORACLES[env_id].answers
    env = make_view(env_id, kwargs, single_agent=False, brief=True)
    rng = random.Random(0)
    outcomes = set()
    for problem, corrupt in itertools.product(range(24), (False, True)):
        env.reset(seed=problem)
        program, printed, corrupted = answers.board_program(env.unwrapped, rng if corrupt else None)
        assert corrupted == corrupt
        observation = env.observe("tool")
        board = [line for line in observation.splitlines() if line.startswith("r") or set(line) <= set(".#AG")]
        board = [line for line in board if line]
        copied = program.split("'''")[1].splitlines()
        copied = [line for line in copied if line.startswith("r") or set(line) <= set(".#AG")]
        wrong_cells = sum(a != b for x, y in zip(board, copied, strict=True) for a, b in zip(x, y, strict=True))
        assert wrong_cells == 0 if not corrupt else 1 <= wrong_cells <= 2  # 2: the goal copied elsewhere
        env.step(program)
        view = env.observe("planner")
        shown = printed_this_turn(env.unwrapped)
        if printed:
            assert shown == answers.tool_output(printed) and f"Program output:\n{shown}" in view
            outcomes.add("wrong" if corrupt else "solution")
        else:  # the mis-copy left no answer (a cell without a digit, a goal out of reach): it raised
            assert corrupt and shown is None and "Traceback" in view
            outcomes.add("raised")
        placed = copy.deepcopy(env)
        placed.step(answers.planner_reply(printed) if printed else "no answer")
        assert bool(placed.infos["planner"]["success"]) != corrupt  # what the program printed solves iff clean
    assert {"solution", "wrong"} <= outcomes


def test_sudoku_planner_copies_what_the_tool_printed_this_turn():
    """The planner's demonstration takes the tool's printed answer over, right or wrong (a
    mistake of its own is a wrong answer even when the tool's was wrong too), and works the
    answer out from the board when the tool printed nothing this turn."""
    act = capability("sudoku_v0", Demonstrations).act
    env = make_view("sudoku_v0", SUDOKU, single_agent=False, brief=True)
    env.reset(seed=3)
    env.step("```python\nprint('1 1 1; 4 4 4')\n```")
    assert act(env, "planner", random.Random(0), 0.0) == ("PLACE: 1 1 1; 4 4 4", False)
    solution = sudoku_demonstrations.solution(env.unwrapped)
    for seed in range(20):
        reply, corrupted = act(env, "planner", random.Random(seed), 1.0)
        assert corrupted and not set(solution) <= set(reply.removeprefix("PLACE: ").split("; "))
    env.reset(seed=3)
    env.step("no program")  # nothing printed: the planner's own (oracle) answer
    reply, _ = act(env, "planner", random.Random(0), 0.0)
    assert sorted(reply.removeprefix("PLACE: ").split("; ")) == sorted(solution)


def test_mistake_rate_is_validated():
    env = pettingllm_envs.make("plan_path_v0", **PLAN)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="mistake_rate"):
        capability("plan_path_v0", Demonstrations).act(env, "tool", random.Random(0), -0.1)


@pytest.mark.parametrize("env_id, kwargs", [("plan_path_v0", PLAN), ("sudoku_v0", SUDOKU)])
def test_demonstrations_come_from_the_state_in_any_process(env_id, kwargs):
    """The capability reads the env's state, not its prompt: on an env pickled mid-episode (as
    a Ray worker receives one) and on one whose prompts are the brief tags, it demonstrates what
    it does on the env itself, and its partner's clean actions solve every episode."""
    demonstrations = capability(env_id, Demonstrations)
    for problem in range(6):
        env = pettingllm_envs.make(env_id, **kwargs)
        brief = make_view(env_id, kwargs, single_agent=False, brief=True)
        env.reset(seed=problem)
        brief.reset(seed=problem)
        for agent in ("tool", "planner"):
            shipped = pickle.loads(pickle.dumps(env))
            action = demonstrations.act(env, agent, random.Random(problem), 0.5)
            assert demonstrations.act(shipped, agent, random.Random(problem), 0.5) == action
            assert demonstrations.act(brief, agent, random.Random(problem), 0.5) == action
            env.step(demonstrations.partner(env, agent))
            brief.step(demonstrations.partner(brief, agent))
        assert env.unwrapped.is_success() and brief.unwrapped.is_success()
