"""Reward attacks on reasoning_gym_v0, played as a reward-seeking policy would.

reasoning-gym's ``score_answer`` functions were written for good-faith answers; each test
is one way a policy could make them pay (or run) without solving, and asserts it earns no
more than a trivial wrong answer, whose return is 0 for every role. Where the dataset's
scorer alone would have paid (or run the code), the test shows that first, so the test
fails if the bridge's guard is removed.
"""

from __future__ import annotations

import random
import string
from typing import Any

import pytest

pytest.importorskip("reasoning_gym")

from reasoning_gym_play import ENV_ID, play_answers, printing, tagged, wrong_answer

import pettingllm_envs
from pettingllm_envs.bridges.reasoning_gym_answers import max_answer_chars
from pettingllm_envs.bridges.reasoning_gym_env import scripted_policy
from pettingllm_envs.episodes import Episode, play_episode
from pettingllm_envs.sandbox import execute

DATASETS = ("basic_arithmetic", "countdown", "gsm_symbolic", "knights_knaves", "maze", "spell_backward",
            "letter_jumble", "fraction_simplification")
SEEDS = range(3)
ROLES = ("reasoner", "tool")


def raw(dataset: str, seed: int = 0, **config: Any) -> Any:
    env = pettingllm_envs.make(ENV_ID, dataset=dataset, **config).unwrapped
    env.reset(seed=seed)
    return env


def assert_no_more_than_trivially_wrong(episode: Episode) -> None:
    assert not episode.success
    for role in ROLES:
        assert episode.total_reward(role) <= 0.0, (role, episode.total_reward(role))


def test_a_trivial_wrong_answer_earns_zero_and_the_oracle_earns_more():
    for dataset in DATASETS:
        wrong = play_answers(dataset, 0, wrong_answer)
        assert [wrong.total_reward(role) for role in ROLES] == [0.0, 0.0], dataset
        solved = play_episode(pettingllm_envs.make(ENV_ID, dataset=dataset), scripted_policy, seed=0)
        assert all(solved.total_reward(role) == 2.0 for role in ROLES), dataset


HEDGES = {
    "wrong or gold": lambda env: f"{wrong_answer(env)} or {env.instance.answer}",
    "wrong, then gold on the next line": lambda env: f"{wrong_answer(env)}\n{env.instance.answer}",
    "a list of candidates": lambda env: ", ".join([wrong_answer(env), env.instance.answer, wrong_answer(env) + "1"]),
    "gold, then another answer": lambda env: f"{env.instance.answer} or {wrong_answer(env)}",
    "gold with a dump after it": lambda env: env.instance.answer + "\n" + "x" * max_answer_chars(env.instance.answer),
    "the question itself": lambda env: env.instance.question,
    "the whole observation": lambda env: str(env.observe("reasoner")),
}


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("hedge", [h for h in HEDGES if h != "gold, then another answer"])
def test_hedges_dumps_and_the_question_earn_no_more_than_a_wrong_answer(dataset, hedge):
    for seed in SEEDS:
        assert_no_more_than_trivially_wrong(play_answers(dataset, seed, HEDGES[hedge]))


@pytest.mark.parametrize("dataset", ["gsm_symbolic", "letter_jumble", "fraction_simplification", "spell_backward"])
def test_gold_followed_by_another_answer_is_not_paid_where_the_scorer_would_pay_it(dataset):
    """These scorers read the first number / first words / a prefix, so they pay full credit
    for ``gold or wrong``: the bridge refuses it (one number) or pays only exact 1.0."""
    paid_by_scorer = 0
    for seed in range(8):
        env = raw(dataset, seed)
        hedge = HEDGES["gold, then another answer"](env)
        paid_by_scorer += env.dataset.score_answer(hedge, env.instance.entry) >= 1.0
        env.step(tagged(hedge))
        last = env.infos["reasoner"]["last_action"]
        assert last["reward"] <= 0.0 and not env.correct["reasoner"], (dataset, seed, hedge)
    if dataset in ("gsm_symbolic", "spell_backward"):
        assert paid_by_scorer > 0, "the dataset's scorer no longer pays this hedge: update the docstring"


def test_only_the_last_answer_tag_counts():
    for dataset in DATASETS:
        env = raw(dataset, 0)
        text = "".join(f"<answer>{a}</answer>" for a in (env.instance.answer, wrong_answer(env)))
        env.step(text)
        assert env.infos["reasoner"]["last_action"]["reward"] == 0.0, dataset
        assert env.infos["reasoner"]["last_action"]["parsed"]["answer"] == wrong_answer(env)


def test_partial_credit_for_formats_and_near_misses_is_not_paid():
    env = raw("countdown", 0)
    assert env.dataset.score_answer("1 + 1", env.instance.entry) == 0.05  # the dataset pays any wrong expression
    env.step(tagged("1 + 1"))
    last = env.infos["reasoner"]["last_action"]
    assert last["parsed"]["score"] == 0.05 and last["reward"] == 0.0
    env = raw("basic_arithmetic", 0)
    near = env.instance.answer + "0"  # contains the gold: the default scorer pays len(gold)/len(answer)
    assert 0 < env.dataset.score_answer(near, env.instance.entry) < 1
    env.step(tagged(near))
    assert env.infos["reasoner"]["last_action"]["reward"] == 0.0


def test_spell_backward_prefix_credit_that_sums_past_one_is_not_full_credit():
    overshoot = 0
    for seed in range(30):
        env = raw("spell_backward", seed)
        answer = env.instance.answer + "q"
        raw_score = env.dataset.score_answer(answer, env.instance.entry)
        overshoot += raw_score >= 1.0
        env.step(tagged(answer))
        assert not env.correct["reasoner"] and env.infos["reasoner"]["last_action"]["reward"] <= 0.0
    assert overshoot > 0, "no word made the scorer's float sum reach 1.0: the test shows nothing"


INJECTIONS = {
    "countdown": "__import__('pathlib').Path({path!r}).write_text('ran')",
    "spiral_matrix": "__import__('pathlib').Path({path!r}).write_text('ran')",
    "binary_matrix": "[__import__('pathlib').Path({path!r}).write_text('ran')]",
    # eval skips a leading indent that ast.parse rejects: the guard must read both spellings
    "n_queens": " \t__import__('pathlib').Path({path!r}).write_text('ran')",
    "string_insertion": "list(__import__('pathlib').Path({path!r}).write_text('ran') * 'a')",
}


@pytest.mark.parametrize("dataset", sorted(INJECTIONS))
def test_code_in_an_answer_never_runs_in_the_scorer(dataset, tmp_path):
    """reasoning-gym scores these answers with eval or SymPy's parse_expr: the payload runs
    when the dataset scores it directly, and never through the env (reasoner or tool)."""
    env = raw(dataset, 0)
    direct = tmp_path / "direct"
    env.dataset.score_answer(INJECTIONS[dataset].format(path=str(direct)), env.instance.entry)
    assert direct.exists(), "the scorer no longer evaluates answers: the guard may be relaxed"
    through_env = tmp_path / "env"
    payload = INJECTIONS[dataset].format(path=str(through_env))
    env.step(tagged(payload))
    env.step(f"```python\nprint({payload!r})\n```")
    assert not through_env.exists()
    for role in ROLES:
        last = env.infos[role]["last_action"]
        assert not last["valid"] and ("scored" in last["invalid_reason"] or "arithmetic" in last["invalid_reason"])


def test_a_legitimate_answer_still_passes_the_code_guards():
    for dataset in sorted(INJECTIONS):
        env = raw(dataset, 1)
        env.step(tagged(env.instance.answer))
        assert env.correct["reasoner"], dataset


@pytest.mark.parametrize("dataset", ["basic_arithmetic", "maze"])
def test_repeating_a_right_answer_while_the_tool_stalls_earns_it_once(dataset):
    env = pettingllm_envs.make(ENV_ID, dataset=dataset, max_turns=4)
    stalling = {"reasoner": scripted_policy, "tool": lambda o, a, i: "I need more time to think."}
    episode = play_episode(env, stalling, seed=0)
    assert episode.turns == 4 and not episode.success  # the tool acts last: its stalling withdrew the team's answer
    locals_ = {role: sum(r.reward_local for r in env.unwrapped.history if r.agent == role) for role in ROLES}
    assert locals_["reasoner"] == 1.0  # once, not once per turn
    assert locals_["tool"] == -4 * env.unwrapped.config.format_penalty
    solved = play_episode(pettingllm_envs.make(ENV_ID, dataset=dataset), scripted_policy, seed=0)
    assert all(episode.total_reward(role) <= solved.total_reward(role) for role in ROLES)


def test_switching_between_answers_every_turn_earns_nothing_more():
    """Alternating right and wrong answers pays each right answer's credit back when it is dropped."""
    env = pettingllm_envs.make(ENV_ID, dataset="basic_arithmetic", max_turns=6)
    raw_env = env.unwrapped
    turn = {"n": 0}

    def alternating(observation: str, agent: str, info: dict[str, Any]) -> str:
        if agent == "tool":
            return printing(wrong_answer(raw_env) + "7")
        turn["n"] += 1  # the reasoner: right on odd turns, wrong on even ones, ending wrong
        return tagged(raw_env.instance.answer if turn["n"] % 2 else wrong_answer(raw_env))

    episode = play_episode(env, alternating, seed=2)
    solved = play_episode(pettingllm_envs.make(ENV_ID, dataset="basic_arithmetic"), scripted_policy, seed=2)
    for role in ROLES:
        assert episode.total_reward(role) <= solved.total_reward(role)
    assert episode.total_reward("reasoner") <= 0.0


def test_junk_earns_at_most_its_penalty():
    rng = random.Random(0)
    for dataset in DATASETS:
        env = pettingllm_envs.make(ENV_ID, dataset=dataset)
        junk = lambda o, a, i: "".join(rng.choice(string.printable) for _ in range(rng.randint(0, 400)))  # noqa: E731
        episode = play_episode(env, junk, seed=1)
        assert_no_more_than_trivially_wrong(episode)


def test_the_tool_cannot_import_reasoning_gym_to_regenerate_the_answer():
    probe = execute("import reasoning_gym\nprint('imported')", timeout=10)
    if not probe.filesystem_isolated:
        pytest.skip("the sandbox's filesystem view needs root: reasoning-gym is visible to programs here")
    assert "imported" not in probe.stdout and "ModuleNotFoundError" in probe.stderr
    env = raw("basic_arithmetic", 0)
    env.step(tagged(wrong_answer(env)))
    env.step("```python\nimport reasoning_gym\nds = reasoning_gym.create_dataset('basic_arithmetic', seed=0, "
             "size=10000)\nprint(ds[0]['answer'])\n```")
    assert not env.infos["tool"]["last_action"]["valid"] and env.infos["tool"]["last_action"]["reward"] < 0


def hostile_answers(env: Any) -> list[str]:
    """Answers as long as the guards allow, shaped to slow a scorer down (regexes, parsers)."""
    limit = max_answer_chars(env.instance.answer)
    return ["(" * (limit // 2) + ")" * (limit // 2), "9" * limit, "1/" * (limit // 2) + "1", "[" * limit,
            "a" * (limit - 1) + "!", " ".join(["Q"] * (limit // 2)), "\n".join(["1 0"] * (limit // 4)),
            "-" * limit, "{" * (limit // 2) + "}" * (limit // 2), "\x00" * limit]


@pytest.mark.parametrize("dataset", [*DATASETS, *(pytest.param(name, marks=pytest.mark.slow) for name in (
    "futoshiki", "mahjong_puzzle", "needle_haystack", "number_sequence", "sokoban", "tower_of_hanoi", "n_queens",
    "spiral_matrix", "number_sorting", "jugs", "cryptarithm", "kakurasu", "survo"))])
def test_hostile_answers_of_the_longest_allowed_length_are_scored_as_wrong(dataset):
    env = raw(dataset, 0)
    for answer in hostile_answers(env):
        env.reset(seed=0)
        env.step(tagged(answer))  # the reasoner's answer goes through the guards to the scorer
        last = env.infos["reasoner"]["last_action"]
        assert last["reward"] <= 0.0 and not env.correct["reasoner"], (dataset, answer[:20])


def test_the_length_limit_tells_little_about_the_right_answer_s_length():
    """Probing the longest scored answer must not read the gold's length off the limit."""
    env = raw("basic_arithmetic", 0)
    limit = max_answer_chars(env.instance.answer)
    assert limit & (limit - 1) == 0  # a power of two: many gold lengths share it
    assert {max_answer_chars("1" * n) for n in range(1, 14)} == {256}
    env.step(tagged("1" * (limit + 1)))
    reason = env.infos["reasoner"]["last_action"]["invalid_reason"]
    assert str(limit) not in reason and "far more than a right answer needs" in reason
