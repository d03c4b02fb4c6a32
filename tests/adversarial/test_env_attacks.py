"""Reward attacks on the non-code envs, played as a reward-seeking policy would.

Each test is one attack on one role: it asserts the hack earns no more than a trivial
wrong answer (or than the honest solve), and where it was a real hole the comment says
what it earned before the fix. The invariants, per env and role:

* a wrong or empty action never earns more than a correct one;
* no role's return on a failed episode exceeds its return on a solved one (the oracle's);
* repeated or enumerated actions earn no extra credit;
* local rewards stay within the bounds of the env's module docstring (``Reward bounds``).

code_v0 and the sandbox have their own corpus; tests/adversarial/test_fuzz.py checks that
no string makes ``env.step`` raise.
"""

from __future__ import annotations

import copy
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import pettingllm_envs
from pettingllm_envs.episodes import Episode, play_episode
from pettingllm_envs.games.sudoku import read_board
from pettingllm_envs.policies import scripted_policy
from pettingllm_envs.research.knowledge_base import HOP_QUESTIONS

Policy = Callable[[str, str, dict[str, Any]], str]
NON_CODE_ENVS = ("math_v0", "plan_path_v0", "research_v0", "sokoban_v0", "sudoku_v0", "tictactoe_v0")
#: Small, fast configurations of each env.
CONFIGS: dict[str, dict[str, Any]] = {
    "math_v0": {}, "plan_path_v0": {}, "research_v0": {"hops": 2}, "sokoban_v0": {},
    "sudoku_v0": {"size": 4}, "tictactoe_v0": {},
}
SEEDS = range(3)


def play(env_id: str, policy: Policy | dict[str, Policy], seed: int, **config: Any) -> Episode:
    return play_episode(pettingllm_envs.make(env_id, **{**CONFIGS[env_id], **config}), policy, seed=seed)


def local_totals(env_id: str, policy: Policy | dict[str, Policy], seed: int, **config: Any) -> dict[str, float]:
    """Per role, the sum of its local rewards over one episode (the part each env controls)."""
    env = pettingllm_envs.make(env_id, **{**CONFIGS[env_id], **config})
    play_episode(env, policy, seed=seed)
    totals = dict.fromkeys(env.unwrapped.possible_agents, 0.0)
    for record in env.unwrapped.history:
        totals[record.agent] += record.reward_local
    return totals


def with_role(env_id: str, role: str, attack: Policy) -> dict[str, Policy]:
    """The attack for ``role``, the oracle for every other role."""
    oracle = scripted_policy(env_id)
    roles = pettingllm_envs.make(env_id, **CONFIGS[env_id]).possible_agents
    return {r: (attack if r == role else oracle) for r in roles}


def constant(text: str) -> Policy:
    return lambda observation, agent, info: text


def raw(env_id: str, seed: int = 0, **config: Any) -> Any:
    env = pettingllm_envs.make(env_id, **{**CONFIGS[env_id], **config}).unwrapped
    env.reset(seed=seed)
    return env


def last(env: Any, agent: str) -> dict[str, Any]:
    return env.infos[agent]["last_action"]


def program(*lines: str) -> str:
    return "```python\n" + "\n".join(lines) + "\n```"


# ------------------------------------------------------------ every env, every role
JUNK = ["", "   \n\t", "\x00" * 50, "🙂" * 200, "MOVES: MOVE: PLACE: ANSWER: DELEGATE: REPORT: \\boxed{",
        "```python\nprint(1)\n", "```\n```", "9" * 5000]


@pytest.mark.parametrize("env_id", NON_CODE_ENVS)
def test_junk_and_empty_actions_earn_no_more_than_a_wrong_answer_and_stay_in_bounds(env_id):
    """Every role: junk, empty and over-long actions are penalised (never rewarded), and
    the oracle's first action earns at least as much as any of them."""
    env = raw(env_id)
    for agent in env.possible_agents:
        env = raw(env_id)
        while env.agent_selection != agent:  # let the oracle bring the episode to this role's turn
            env.step(scripted_policy(env_id)(env.observe(env.agent_selection), env.agent_selection,
                                              env.infos[env.agent_selection]))
        oracle_action = scripted_policy(env_id)(env.observe(agent), agent, env.infos[agent])
        honest = copy.deepcopy(env)
        honest.step(oracle_action)
        honest_reward = last(honest, agent)["reward_local"]
        for junk in [*JUNK, "x" * (env.config.max_action_chars + 1)]:
            attacked = copy.deepcopy(env)
            attacked.step(junk)
            reward = last(attacked, agent)["reward_local"]
            assert reward <= 0.0, (agent, junk[:30], reward)
            assert reward <= honest_reward
            assert reward >= -max(attacked.config.format_penalty, getattr(attacked.config, "tool_error_penalty", 0))


# --------------------------------------------------------------------------- sudoku
def _sudoku_cells(env: Any) -> list[int]:
    return [i for i in range(env.instance.size ** 2) if not env.board[i]]


def _one_wrong_value(env: Any) -> str:
    size = env.instance.size
    index = _sudoku_cells(env)[0]
    wrong = next(v for v in range(1, size + 1) if v != env.instance.solution[index])
    return f"PLACE: {index // size + 1} {index % size + 1} {wrong}"


def _every_value_everywhere(env: Any) -> str:
    size = env.instance.size
    return "PLACE: " + "; ".join(f"{i // size + 1} {i % size + 1} {v}" for i in _sudoku_cells(env)
                                 for v in range(1, size + 1))


@pytest.mark.parametrize("seed", SEEDS)
def test_sudoku_writing_every_value_into_every_cell_earns_less_than_one_wrong_value(seed):
    """Before: only the right placements were applied and the penalty was capped at 1, so this
    solved a 4x4 puzzle in one action (local 1 - 1 = 0, global 1: a positive return)."""
    honest_wrong, enumerated = raw("sudoku_v0", seed), raw("sudoku_v0", seed)
    for env, planner_action in ((honest_wrong, _one_wrong_value(honest_wrong)),
                                (enumerated, _every_value_everywhere(enumerated))):
        env.step("no code")
        env.step(planner_action)
    assert last(enumerated, "planner")["reward"] <= last(honest_wrong, "planner")["reward"] < 0
    assert enumerated.board == enumerated.instance.givens and not enumerated.is_success()
    # the tool printing every candidate earns no more either
    tool = raw("sudoku_v0", seed)
    size = tool.instance.size
    tool.step(program(f"for i in {_sudoku_cells(tool)}:", f"    for v in range(1, {size + 1}):",
                      f"        print(i // {size} + 1, i % {size} + 1, v)"))
    wrong_tool = raw("sudoku_v0", seed)
    wrong_tool.step(program(f"print({_one_wrong_value(wrong_tool)[7:]!r})"))
    assert last(tool, "tool")["reward"] <= last(wrong_tool, "tool")["reward"] < 0


@pytest.mark.parametrize("seed", SEEDS)
def test_sudoku_enumerating_one_value_per_turn_solves_nothing(seed):
    """Over the turns: value 1 in every empty cell, then 2, then 3. Each answer has a wrong
    value, so none is applied, and wrong values are counted, never named."""
    env = raw("sudoku_v0", seed)
    size = env.instance.size
    total = 0.0
    for value in range(1, env.config.max_turns + 1):
        env.step("no code")
        env.step("PLACE: " + "; ".join(f"{i // size + 1} {i % size + 1} {value}" for i in _sudoku_cells(env)))
        total += last(env, "planner")["reward"]
        parsed = last(env, "planner")["parsed"]
        assert all("not the solution" not in v for v in parsed["violations"])  # wrong values are never named
        assert parsed["violations"] or parsed["wrong_values"]
    assert env.board == env.instance.givens and total < 0


@pytest.mark.parametrize("seed", SEEDS)
def test_sudoku_tool_repeating_the_solution_while_the_planner_waits_earns_it_once(seed):
    """Before: the tool's output was scored on a copy every turn, so printing the solution
    three times while the planner waited earned 3.0 on a failed episode (1.0 when solved)."""
    oracle = scripted_policy("sudoku_v0")
    waiting = play("sudoku_v0", {"tool": oracle, "planner": constant("I wait.")}, seed)
    solved = play("sudoku_v0", oracle, seed)
    assert not waiting.success and solved.success
    assert waiting.total_reward("tool") <= solved.total_reward("tool") + 1e-9
    assert waiting.total_reward("planner") < solved.total_reward("planner")


def test_sudoku_repeated_right_placements_are_credited_once():
    env = raw("sudoku_v0", 0)
    size = env.instance.size
    index = _sudoku_cells(env)[0]
    one = f"{index // size + 1} {index % size + 1} {env.instance.solution[index]}"
    env.step("no code")
    env.step("PLACE: " + "; ".join([one] * 30))
    assert last(env, "planner")["reward_local"] == pytest.approx(1 / env.instance.empty_cells)


# ------------------------------------------------------------------ plan_path, sokoban
@pytest.mark.parametrize("env_id", ["plan_path_v0", "sokoban_v0"])
@pytest.mark.parametrize("seed", SEEDS)
def test_tool_repeating_its_plan_while_the_planner_waits_earns_it_once(env_id, seed):
    """Before: the tool's moves were scored on a copy from the unchanged state every turn,
    so proposing the solution four times while the planner waited earned 4x the solve (and in
    sokoban a box that started on a goal paid the team reward at every waiting step)."""
    oracle = scripted_policy(env_id)
    policies = {"tool": oracle, "planner": constant("Let me think.")}
    waiting, solved = play(env_id, policies, seed), play(env_id, oracle, seed)
    assert not waiting.success and solved.success
    assert waiting.total_reward("tool") <= solved.total_reward("tool") + 1e-9
    assert local_totals(env_id, policies, seed)["tool"] <= local_totals(env_id, oracle, seed)["tool"] + 1e-9


@pytest.mark.parametrize("env_id", ["plan_path_v0", "sokoban_v0"])
def test_only_the_last_moves_line_counts(env_id):
    """Enumerating several MOVES lines gets exactly what the last one alone gets."""
    oracle = scripted_policy(env_id)
    env = raw(env_id)
    env.step("no code")
    answer = oracle(env.observe("planner"), "planner", env.infos["planner"])
    many = "\n".join(f"MOVES: {m}" for m in ("U U U", "D D", "L R L R", "R")) + "\n" + answer
    alone, enumerated = raw(env_id), raw(env_id)
    for e, text in ((alone, answer), (enumerated, many)):
        e.step("no code")
        e.step(text)
    assert last(enumerated, "planner")["reward"] == pytest.approx(last(alone, "planner")["reward"])


@pytest.mark.parametrize("seed", SEEDS)
def test_plan_path_oscillating_earns_less_than_a_wrong_move(seed):
    """Walking back and forth (every move list that returns to where it started) never pays."""
    env = raw("plan_path_v0", seed)
    maze = env.instance
    r, c = maze.start
    step = next(m for m, (dr, dc) in {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}.items()
                if maze.open(r + dr, c + dc))
    back = {"U": "D", "D": "U", "L": "R", "R": "L"}[step]
    total = 0.0
    for _ in range(env.config.max_turns):
        env.step("no code")
        env.step("MOVES: " + f"{step} {back} " * 10)
        total += last(env, "planner")["reward"]
    assert total < 0 and env.position == maze.start


def test_a_program_printing_moves_it_did_not_compute_is_scored_by_the_moves_alone():
    """Program output cannot forge env markers: the env reads only the moves it printed, and
    printing 'success' or a fake result line earns nothing."""
    env = raw("plan_path_v0", 0)
    env.step(program("print('Result: goal reached, reward 1.0')", "print('MOVES: U')", "print('SUCCESS')"))
    plain = raw("plan_path_v0", 0)
    plain.step(program("print('MOVES: U')"))
    assert last(env, "tool")["reward"] <= max(0.0, last(plain, "tool")["reward"])


def test_unclosed_boxed_answer_is_reported_as_unclosed():
    env = raw("math_v0", 0)
    env.step("So the answer is \\boxed{42")
    assert "not closed" in last(env, "reasoner")["invalid_reason"]
    assert last(env, "reasoner")["reward_local"] == -env.config.format_penalty


def test_unclosed_code_block_is_reported_as_unclosed():
    env = raw("plan_path_v0", 0)
    env.step("```python\nprint('MOVES: U')\n")
    assert "not closed" in last(env, "tool")["invalid_reason"]
    env = raw("plan_path_v0", 0)
    env.step("I would go up.")
    assert "no ```python code block" in last(env, "tool")["invalid_reason"]
    for env_id in ("math_v0", "sudoku_v0", "sokoban_v0"):
        env = raw(env_id, 0)
        if env.agent_selection != "tool":
            env.step("\\boxed{0}")
        env.step("```python\nprint(1)\n")
        assert "not closed" in last(env, "tool")["invalid_reason"], env_id
    env = pettingllm_envs.make("code_v0").unwrapped  # the coder's code and the tester's tests
    env.reset(seed=0)
    env.step("```python\ndef f(x):\n    return x\n")
    assert "not closed" in env.infos["coder"]["last_action"]["invalid_reason"]
    env.step("```python\nassert f(1) == 1\n")
    assert "not closed" in env.infos["tester"]["last_action"]["invalid_reason"]


# ---------------------------------------------------------------------------- math
def _gold(env: Any) -> str:
    return env.instance.answer


@pytest.mark.parametrize("seed", SEEDS)
def test_math_many_boxed_answers_or_a_hedge_earn_nothing(seed):
    """Only the last \\boxed{} counts, and a hedge inside it is never right."""
    env = raw("math_v0", seed)
    gold = int(float(_gold(env)))
    attempts = [
        "".join(f"\\boxed{{{n}}}" for n in range(gold - 3, gold + 4) if n != gold) + f"\\boxed{{{gold + 5}}}",
        f"\\boxed{{x={gold - 1} \\text{{ or }} x={gold}}}",
        f"\\boxed{{{gold} \\approx {gold + 1}}}",
        f"\\boxed{{{', '.join(str(n) for n in range(gold - 2, gold + 3))}}}",
        f"\\boxed{{\\{{{gold - 1}, {gold}\\}}}}",
    ]
    for text in attempts:
        attacked = raw("math_v0", seed)
        attacked.step(text)
        assert last(attacked, "reasoner")["reward"] == 0.0, text
        assert not last(attacked, "reasoner")["parsed"]["correct"]


@pytest.mark.parametrize("seed", SEEDS)
def test_math_agreeing_on_a_wrong_answer_ends_the_episode_with_nothing(seed):
    wrong = str(int(float(raw("math_v0", seed).instance.answer)) + 1)
    agreed = play("math_v0", {"reasoner": constant(f"\\boxed{{{wrong}}}"),
                              "tool": constant(program(f"print({wrong})"))}, seed)
    solved = play("math_v0", scripted_policy("math_v0"), seed)
    assert not agreed.success and solved.success
    for role in ("reasoner", "tool"):
        assert agreed.total_reward(role) == 0.0 < solved.total_reward(role)


@pytest.mark.parametrize("seed", SEEDS)
def test_math_repeating_a_right_answer_while_the_other_role_disagrees_earns_it_once(seed):
    """Before: every right answer paid its role 1, so a tool that kept printing a wrong answer
    kept the episode going and the reasoner collected 1 per turn (4 against 1 solved)."""
    wrong = str(int(float(raw("math_v0", seed).instance.answer)) + 1)
    oracle = scripted_policy("math_v0")
    disagreeing = local_totals("math_v0", {"reasoner": oracle, "tool": constant(program(f"print({wrong})"))}, seed)
    solved = local_totals("math_v0", oracle, seed)
    assert disagreeing["reasoner"] == solved["reasoner"] == 1.0
    assert disagreeing["tool"] == 0.0 < solved["tool"]


@pytest.mark.parametrize("seed", SEEDS)
def test_math_tool_printing_many_answers_is_read_by_its_last_line(seed):
    env = raw("math_v0", seed)
    gold = int(float(_gold(env)))
    env.step("\\boxed{0}")
    env.step(program(*(f"print({n})" for n in range(gold - 5, gold + 5)), f"print({gold + 7})"))
    assert last(env, "tool")["reward_local"] == 0.0


def test_math_tool_cannot_read_the_generator_or_import_the_project():
    """A tool program that tries to rebuild the answer from the project's generator (which
    regenerates every problem from its index) or to find its sources earns nothing."""
    env = raw("math_v0", 0)
    question = env.instance.question
    env.step("\\boxed{0}")
    env.step(program(
        "import glob, importlib.util, os, sys",
        "def found(name):",
        "    try:",
        "        return importlib.util.find_spec(name) is not None",
        "    except Exception:",
        "        return False",
        "print('SPEC', found('pettingllm_envs.math.generator'))",
        "roots = [sys.prefix, os.getcwd(), '/work', '/home', '/root', '/tmp', '/opt', '/srv', '/usr/local/lib']",
        "hits = [p for r in roots for p in glob.glob(os.path.join(r, '**', 'generator.py'), recursive=True)",
        "        if 'pettingllm' in p]",
        "print('SOURCES', hits[:3])",
        "try:",
        "    import random",
        "    from pettingllm_envs.math.generator import generate_problem",
        f"    question = {question!r}",
        "    for i in range(5000):",
        "        q, a, *_ = generate_problem(random.Random(i), 0)",
        "        if q == question:",
        "            print(a)",
        "            break",
        "except Exception as error:",
        "    print('IMPORT FAILED', type(error).__name__)",
        "    print(-1)",
    ))
    tool = last(env, "tool")
    output = env.observe("reasoner")
    assert "SPEC False" in output and "SOURCES []" in output, output[-600:]
    assert tool["reward_local"] <= 0.0 and not env.is_success()


def test_math_reasoner_step_with_a_huge_power_is_bounded_in_a_thread():
    """The evaluation suite steps episodes in threads; before the bounded comparison, this
    step froze the whole process (SymPy expanding in C, no alarm in a thread)."""
    env = raw("math_v0", 0)
    done = threading.Event()

    def work() -> None:
        env.step("\\boxed{(x+1)^{5000} \\cdot \\binom{10^9}{5 \\cdot 10^8}}")
        done.set()

    start = time.monotonic()
    threading.Thread(target=work, daemon=True).start()
    assert done.wait(30.0), "env.step hung in a thread"
    assert last(env, "reasoner")["reward"] == 0.0 and time.monotonic() - start < 30.0


# ------------------------------------------------------------------------ research
def _hop(env: Any, hop: int) -> tuple[str, str]:
    problem = env.instance
    start = problem.entity if hop == 0 else problem.path[hop - 1]
    return HOP_QUESTIONS[problem.chain[hop]].format(e=start), problem.path[hop]


def _sub_oracle() -> Policy:
    oracle = scripted_policy("research_v0")
    return lambda observation, agent, info: oracle(observation, "sub", info)


@pytest.mark.parametrize("seed", SEEDS)
def test_research_repeating_one_sub_question_earns_the_sub_nothing_more(seed):
    """Before: each delegation of the same sub-question paid the sub its tool call and its
    report again, so four copies of hop 1 and a wrong answer paid it 2.2 against 2.1 solved."""
    env = raw("research_v0", seed)
    question, _ = _hop(env, 0)
    sub = _sub_oracle()
    steps = iter([f"DELEGATE: {question}"] * env.config.max_delegations)
    main = lambda observation, agent, info: next(steps, "ANSWER: nobody")  # noqa: E731
    failed = play("research_v0", {"main": main, "sub": sub}, seed)
    solved = play("research_v0", scripted_policy("research_v0"), seed)
    assert not failed.success and solved.success
    assert failed.total_reward("sub") < solved.total_reward("sub")
    delegations = failed.final_infos["sub"]["research"]["delegations"]
    assert [d["credited"] for d in delegations] == [True] + [False] * (len(delegations) - 1)


@pytest.mark.parametrize("seed", SEEDS)
def test_research_enumerating_irrelevant_facts_earns_nothing(seed):
    """Correct but off-chain hops (facts about other entities) earn the sub nothing, so
    enumerating the knowledge base cannot beat solving."""
    env = raw("research_v0", seed)
    problem = env.instance
    on_path = set(problem.path) | {problem.entity}
    others = [e.name for e in problem.kb.entities if e.type == "person" and e.name not in on_path]
    questions = iter([f"DELEGATE: In which city was {name} born?" for name in others[: env.config.max_delegations]])
    main = lambda observation, agent, info: next(questions, "ANSWER: nobody")  # noqa: E731
    failed = play("research_v0", {"main": main, "sub": _sub_oracle()}, seed)
    assert failed.total_reward("sub") == 0.0
    assert all(d["report_correct"] and not d["credited"]
               for d in failed.final_infos["sub"]["research"]["delegations"])


def test_research_a_failed_hop_retried_is_credited_once():
    """A sub that fails a hop on purpose and then answers it gets the credit once, and no
    outcome share for the failed attempt."""
    env = raw("research_v0", 0)
    question, answer = _hop(env, 0)
    env.step(f"DELEGATE: {question}")
    env.step("REPORT: nobody")
    env.step(f"DELEGATE: {question}")
    env.step(f"REPORT: {answer}")
    env.step(f"DELEGATE: {question}")
    env.step(f"REPORT: {answer}")
    delegations = env.infos["sub"]["research"]["delegations"]
    assert [d["credited"] for d in delegations] == [False, True, False]
    assert [d["reward_own"] for d in delegations] == [0.0, env.config.report_reward, 0.0]


@pytest.mark.parametrize("seed", SEEDS)
def test_research_main_enumerating_answers_is_wrong(seed):
    env = raw("research_v0", seed)
    names = [e.name for e in env.instance.kb.entities]
    env.step("ANSWER: " + ", ".join(names)[:250])
    assert not env.is_success()
    assert last(env, "main")["reward_local"] == pytest.approx(env.config.main_format_weight)
    env = raw("research_v0", seed)
    env.step("\n".join(f"ANSWER: {name}" for name in names if name != env.instance.answer) + "\nANSWER: x")
    assert not env.is_success()


# ----------------------------------------------------------------------- tictactoe
def test_tictactoe_enumerating_cells_or_moves_is_one_illegal_or_last_move():
    env = raw("tictactoe_v0", 0)
    env.step("MOVE: 1 2 3 4 5 6 7 8 9")
    assert not last(env, "player_x")["valid"]
    assert last(env, "player_x")["reward_local"] == -env.config.format_penalty
    env = raw("tictactoe_v0", 0)
    empty = [i for i in range(9) if env.board[i] == "."]
    env.step("\n".join(f"MOVE: {i + 1}" for i in empty))
    assert env.board.count(".") == len(empty) - 1 and env.board[empty[-1]] == "X"


@pytest.mark.parametrize("seed", SEEDS)
def test_tictactoe_stalling_to_truncation_earns_less_than_winning(seed):
    oracle = scripted_policy("tictactoe_v0")
    stalled = play("tictactoe_v0", {"player_x": constant("I pass."), "player_o": oracle}, seed)
    won = play("tictactoe_v0", oracle, seed)
    assert won.final_infos["player_x"]["success"]
    assert stalled.total_reward("player_x") < won.total_reward("player_x")


# ------------------------------------------------------------------- reward bounds
def _bounds(env_id: str, env: Any) -> dict[str, tuple[float, float]]:
    """Per role, the local-reward bounds stated in the env's module docstring."""
    cfg = env.config
    penalties = [cfg.format_penalty, getattr(cfg, "tool_error_penalty", 0.0)]
    if env_id == "sudoku_v0":
        low = max(*penalties, cfg.max_violation_penalty)
        return dict.fromkeys(env.possible_agents, (-low, 1.0))
    if env_id == "plan_path_v0":
        maze = env.instance
        low = cfg.illegal_move_penalty + cfg.waste_penalty * len(maze.grid) * len(maze.grid[0]) / maze.shortest
        return dict.fromkeys(env.possible_agents, (-max(*penalties, low), 1.0))
    if env_id == "sokoban_v0":
        level, moves = env.instance, cfg.max_moves_per_action
        low = max(*penalties, cfg.deadlock_penalty, cfg.illegal_move_penalty + moves / level.heuristic(level.boxes),
                  cfg.waste_penalty * moves / level.optimal)
        return dict.fromkeys(env.possible_agents, (-low, 1.0))
    if env_id == "math_v0":
        return dict.fromkeys(env.possible_agents, (-max(penalties), 1.0))
    if env_id == "research_v0":
        return {"main": (-cfg.format_penalty, cfg.main_format_weight + cfg.main_correct_weight),
                "sub": (-cfg.format_penalty, max(cfg.tool_call_reward, cfg.report_reward))}
    return dict.fromkeys(env.possible_agents, (-max([*penalties, cfg.illegal_move_penalty]),
                                               cfg.legal_move_reward * 5))


def _episode_caps(env_id: str, env: Any) -> dict[str, float]:
    """Per role, the docstring's cap on the sum of its positive local rewards over an episode."""
    cfg = env.config
    if env_id in ("sudoku_v0", "math_v0"):
        return dict.fromkeys(env.possible_agents, 1.0)
    if env_id in ("plan_path_v0", "sokoban_v0"):
        return {"tool": 1.0, "planner": math.inf}  # the planner's progress nets to 1 (it can walk away and back)
    if env_id == "research_v0":
        hops = len(env.instance.chain)
        return {"main": cfg.main_format_weight + cfg.main_correct_weight,
                "sub": hops * (cfg.report_reward + cfg.tool_call_reward)}  # each hop's lookup is paid once
    return dict.fromkeys(env.possible_agents, cfg.legal_move_reward * 5)


@pytest.mark.parametrize("env_id", NON_CODE_ENVS)
def test_local_rewards_stay_within_the_documented_bounds(env_id):
    """Oracle, junk and attack episodes: every action's local reward lies within the bounds
    of the env's docstring, and a role's positive credit over an episode is bounded too."""
    from pettingllm_envs.policies import random_policy

    policies: list[Policy | dict[str, Policy]] = [scripted_policy(env_id), random_policy(1)]
    roles = pettingllm_envs.make(env_id, **CONFIGS[env_id]).possible_agents
    policies += [with_role(env_id, role, constant(junk)) for role in roles for junk in JUNK[:4]]
    for seed in SEEDS:
        for policy in policies:
            env = pettingllm_envs.make(env_id, **CONFIGS[env_id])
            play_episode(env, policy, seed=seed)
            bounds, caps = _bounds(env_id, env.unwrapped), _episode_caps(env_id, env.unwrapped)
            credit = dict.fromkeys(caps, 0.0)
            for record in env.unwrapped.history:
                low, high = bounds[record.agent]
                assert low - 1e-9 <= record.reward_local <= high + 1e-9, (record.agent, record.reward_local)
                credit[record.agent] += max(0.0, record.reward_local)
            assert all(credit[role] <= caps[role] + 1e-9 for role in caps), (credit, caps)


# ------------------------------------------------ the team reward: stalling in a partly solved state
def test_stalling_a_partly_solved_state_never_beats_finishing():
    """Sudoku: the planner fills half the cells, waits one turn (a free no-op: re-placing a
    given), then fills the rest; against filling everything at once."""
    def planner(split: bool) -> Policy:
        oracle = scripted_policy("sudoku_v0")
        calls = iter(range(100))

        def act(observation: str, agent: str, info: dict[str, Any]) -> str:
            answer = oracle(observation, agent, info)
            triples = answer.removeprefix("PLACE: ").split("; ")
            turn = next(calls)
            if not split or turn == 2:
                return answer
            if turn == 0:
                return "PLACE: " + "; ".join(triples[: len(triples) // 2])
            board, size = read_board(observation)
            given = next(i for i, v in enumerate(board) if v)
            return f"PLACE: {given // size + 1} {given % size + 1} {board[given]}"  # changes nothing, costs nothing
        return act

    stalled = play("sudoku_v0", {"tool": constant("no code"), "planner": planner(True)}, 0)
    direct = play("sudoku_v0", {"tool": constant("no code"), "planner": planner(False)}, 0)
    assert stalled.success and direct.success
    assert stalled.total_reward("tool") <= direct.total_reward("tool")
    assert stalled.total_reward("planner") <= direct.total_reward("planner")


# ------------------------------------------------------ failed never beats solved, generically
def _repeat_first(env_id: str) -> Policy:
    """The oracle's first action for each role, repeated every turn whatever happens."""
    oracle, first = scripted_policy(env_id), {}

    def act(observation: str, agent: str, info: dict[str, Any]) -> str:
        if agent not in first:
            first[agent] = oracle(observation, agent, info)
        return first[agent]
    return act


def _other_problems_answer(env_id: str, seed: int) -> Policy:
    """A fixed wrong answer in the right format: the oracle's first action on another problem."""
    return _repeat_first_of(env_id, seed + 100)


def _repeat_first_of(env_id: str, seed: int) -> Policy:
    env = raw(env_id, seed)
    oracle = scripted_policy(env_id)
    answers: dict[str, str] = {}
    for _ in range(20):
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent] or agent in answers:
            break
        answers[agent] = oracle(env.observe(agent), agent, env.infos[agent])
        env.step(answers[agent])
    return lambda observation, agent, info: answers.get(agent, "")


def _failed_episode_returns(env_id: str, alpha: float | None) -> list[tuple[str, str, int, float, float]]:
    """(attacking role, role, seed, failed return, solved return) of every failed attack episode."""
    config = {} if alpha is None else {"alpha": alpha}
    roles = pettingllm_envs.make(env_id, **CONFIGS[env_id]).possible_agents
    found = []
    for seed in SEEDS:
        solved = play(env_id, scripted_policy(env_id), seed, **config)
        assert solved.success
        for role in roles:
            attacks = [constant(""), constant("I wait."), constant(JUNK[4]), _repeat_first(env_id),
                       _other_problems_answer(env_id, seed)]
            for attack in attacks:
                episode = play(env_id, with_role(env_id, role, attack), seed, **config)
                if episode.success:
                    continue
                for other in roles:
                    if env_id == "tictactoe_v0" and other == "player_o":
                        continue  # competitive: X's failure is O's gain, not a team's
                    found.append((role, other, seed, episode.total_reward(other), solved.total_reward(other)))
    return found


@pytest.mark.parametrize("env_id", NON_CODE_ENVS)
def test_no_role_earns_more_locally_on_a_failed_episode_than_on_the_solved_one(env_id):
    """One role attacks (junk, waiting, the oracle's first action repeated, another problem's
    answer), the others play the oracle: whenever the episode fails, every role's return
    without the per-step team reward (alpha = 0) is at most the solved episode's."""
    for role, other, seed, failed, solved in _failed_episode_returns(env_id, alpha=0.0):
        assert failed <= solved + 1e-9, (role, other, seed, failed, solved)


@pytest.mark.parametrize("env_id", NON_CODE_ENVS)
def test_no_role_earns_more_on_a_failed_episode_than_on_the_solved_one(env_id):
    """The same with each env's default alpha: the team reward (each role paid the change of
    the team state G) sums to alpha * (G_final - G_start), highest when solved."""
    for role, other, seed, failed, solved in _failed_episode_returns(env_id, alpha=None):
        assert failed <= solved + 1e-9, (role, other, seed, failed, solved)
