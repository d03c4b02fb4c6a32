"""Reward attacks on math_v0 and research_v0, played as a reward-seeking policy would: hedged or
many answers, agreeing on a wrong one, repeating a right one, a tool reading the generator, a huge
power; repeated or irrelevant sub-questions, enumerated answers. The invariants are stated in
test_env_attacks.py.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from adversarial.env_attack_helpers import (
    SEEDS,
    Policy,
    constant,
    last,
    local_totals,
    play,
    program,
    raw,
)
from pettingllm_envs.policies import scripted_policy
from pettingllm_envs.research.knowledge_base import HOP_QUESTIONS


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
