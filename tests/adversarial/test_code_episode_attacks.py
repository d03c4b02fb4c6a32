"""Episode attacks on code_v0, played as reward-seeking policies would: keeping an episode
failing to collect per-step credit, tester tests that check only the perturbation's signature,
and a coder answering the shown tests from a lookup table.

Before the local rewards were changes of a potential, a coder repeating a wrong answer against
the oracle tester paid the tester ``max_turns * (1 + bug_credit)`` times its valid share (bug
credit at every step), against its valid share when solved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from code_problems import fence
from code_problems import fresh_problem as fresh

from pettingllm_envs.code.code_env import raw_env, scripted_policy
from pettingllm_envs.code.datasets import humaneval
from pettingllm_envs.episodes import play_episode

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
