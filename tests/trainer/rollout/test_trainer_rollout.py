"""Rollout tests: one regression test per trap of docs/design.md §4, on real envs.

The deterministic sampler below is a real policy (a function from prompts to texts), so
every expectation is exact; one test also runs the tiny LLM end to end.
"""

from __future__ import annotations

import copy
import random
from collections import defaultdict
from dataclasses import dataclass

import pytest

import pettingllm_envs
from pettingllm_envs.policies import scripted_policy
from pettingllm_envs.registry import ENV_MODULES
from trainers.rollout.episodes import independent_rollout, select_branch, tree_rollout

TOY = "toy_bytes_v0"


@pytest.fixture
def toy(monkeypatch):
    """Register the toy env for this test only (tests/envs/testing/test_registry_envs.py must not see it)."""
    monkeypatch.setitem(ENV_MODULES, TOY, "toy_env")
    return lambda **kw: (lambda: pettingllm_envs.make(TOY, **kw))


@dataclass
class Text:
    text: str


class ScriptedSampler:
    """Answers from a table ``agent -> N texts``; records every call."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls: list[tuple[str, list, int]] = []

    def __call__(self, agent, prompts, n):
        self.calls.append((agent, list(prompts), n))
        return [[Text(t) for t in self.table[agent][:n]] for _ in prompts]


def user_text(sample) -> str:
    return sample.messages[-1]["content"]


def test_trap1_later_turn_prompts_reflect_the_selected_branch(toy):
    sampler = ScriptedSampler({"first": ["x", "y", "5", "z"], "second": ["Q", "b", "R", "S"]})
    result = tree_rollout(toy(max_turns=2), [7], 4, sampler, max_steps=20)
    by_node = defaultdict(list)
    for s in result.samples:
        by_node[(s.agent, s.turn)].append(s)
    assert sorted(by_node) == [("first", 0), ("first", 1), ("second", 0), ("second", 1)]
    # greedy: the only rewarded completions ("5", "b") are the selected branches
    assert [s.selected for s in by_node[("first", 0)]] == [False, False, True, False]
    assert [s.selected for s in by_node[("second", 0)]] == [False, True, False, False]
    for s in by_node[("first", 1)]:
        assert "Turn 1." in user_text(s)
        assert "turn 0 first said: 5" in user_text(s) and "turn 0 second said: b" in user_text(s)
        assert "said: x" not in user_text(s) and "said: Q" not in user_text(s)
    # and termination of the selected state is seen: exactly max_turns turns were played
    assert len(result.samples) == 2 * 2 * 4 and result.successes == [True]


def test_trap1_random_selection_is_followed_too(toy):
    sampler = ScriptedSampler({"first": ["a", "b", "c", "d"], "second": ["e", "f", "g", "h"]})
    result = tree_rollout(toy(max_turns=3), [0, 1], 4, sampler, selection="random", rng=random.Random(3))
    for problem in (0, 1):
        chosen = [s for s in result.samples if s.problem == problem and s.selected]
        assert len(chosen) == 6  # one per (agent, turn)
        last_prompt = user_text([s for s in result.samples if s.problem == problem][-1])
        for s in chosen[:-1]:
            assert f"turn {s.turn} {s.agent} said: {s.text}" in last_prompt


def test_trap2_second_agent_rewards_come_from_its_own_n_completions(toy):
    sampler = ScriptedSampler({"first": ["1", "1", "1", "1"], "second": ["a", "Z", "c", "!"]})
    result = tree_rollout(toy(), [0], 4, sampler)
    second = [s for s in result.samples if s.agent == "second"]
    assert [s.text for s in second] == ["a", "Z", "c", "!"]
    assert [s.reward for s in second] == [1.0, 0.0, 1.0, 0.0]
    # every branch saw the same state (the first agent's selected action) and only its own completion
    assert len({user_text(s) for s in second}) == 1
    # the first agent's N branches are N deep copies, not one shared env
    first = [s for s in result.samples if s.agent == "first"]
    assert [s.branch for s in first] == [0, 1, 2, 3]


def test_trap3_groups_never_mix_problems_and_share_one_prompt(toy):
    from trainers.maths.advantages import group_key

    sampler = ScriptedSampler({"first": ["1", "x", "2", "y"], "second": ["a", "B", "c", "D"]})
    result = tree_rollout(toy(max_turns=2), [10, 11, 12], 4, sampler)
    groups = defaultdict(list)
    for s in result.samples:
        groups[group_key(s.problem, s.agent, s.turn, "problem_agent_turn")].append(s)
    assert len(groups) == 3 * 2 * 2
    for members in groups.values():
        assert len(members) == 4
        assert len({s.problem for s in members}) == 1
        assert len({user_text(s) for s in members}) == 1  # GRPO's assumption: one prompt per group
    for coarse in ("problem_agent", "problem"):
        keys = defaultdict(set)
        for s in result.samples:
            keys[group_key(s.problem, s.agent, s.turn, coarse)].add(s.problem)
        assert all(len(problems) == 1 for problems in keys.values())


def test_one_batched_call_per_agent_step_with_every_problem(toy):
    """One call of N completions per agent step with every problem's prompt, and before it one
    call of one completion per branch of the previous step (3 problems x 4 branches): the other
    role's move in every branch's continuation. The last step ends the episodes: nothing to continue."""
    sampler = ScriptedSampler({"first": ["1"] * 4, "second": ["a"] * 4})
    tree_rollout(toy(max_turns=2), [0, 1, 2], 4, sampler)
    assert [(agent, len(prompts), n) for agent, prompts, n in sampler.calls] == [
        ("first", 3, 4), ("second", 12, 1), ("second", 3, 4), ("first", 12, 1), ("first", 3, 4), ("second", 12, 1),
        ("second", 3, 4)]


def test_trap4_planner_sees_the_tool_program_of_the_same_turn():
    oracle = scripted_policy("plan_path_v0")

    def sampler(agent, prompts, n):
        out = []
        for messages in prompts:
            obs = messages[0]["content"] + "\n\n" + messages[1]["content"]
            good = oracle(obs, agent, {})
            out.append([Text("no code"), Text(good), Text("MOVES: U"), Text("```python\nprint(1/0)\n```")][:n])
        return out

    result = tree_rollout(lambda: pettingllm_envs.make("plan_path_v0"), [0, 1], 4, sampler)
    for problem in (0, 1):
        tool = [s for s in result.samples if s.problem == problem and s.agent == "tool" and s.turn == 0]
        planner = [s for s in result.samples if s.problem == problem and s.agent == "planner" and s.turn == 0]
        assert tool[1].selected  # the oracle program has the best reward
        for s in planner:
            assert "This turn the tool agent wrote" in user_text(s)
            assert "from collections import deque" in user_text(s)  # the selected program itself
    assert result.successes == [True, True]
    assert result.seconds_tree <= result.seconds_env


def test_select_branch():
    rng = random.Random(0)
    assert select_branch([0.1, 0.5, 0.5], "greedy", rng) == 1
    picks = {select_branch([0.0] * 4, "random", rng) for _ in range(50)}
    assert picks == {0, 1, 2, 3}
    with pytest.raises(ValueError):
        select_branch([1.0], "best", rng)


def test_independent_mode_plays_n_whole_episodes(toy):
    counter = iter(range(10_000))

    def sampler(agent, prompts, n):
        assert n == 1
        return [[Text(str(next(counter) % 10) if agent == "first" else "a")] for _ in prompts]

    result = independent_rollout(toy(max_turns=2), [0, 1], 3, sampler)
    assert len(result.samples) == 2 * 3 * 2 * 2 and len(result.successes) == 6
    assert all(s.selected for s in result.samples)
    # episodes are independent: the branches' turn-1 prompts differ (they saw different histories)
    turn1 = [user_text(s) for s in result.samples if s.problem == 0 and s.agent == "first" and s.turn == 1]
    assert len(set(turn1)) == 3


def test_tree_rollout_with_the_tiny_llm(toy, tiny_model_dir):
    """End to end with the real policy: N distinct completions per node, rewards re-derivable
    from each completion, and generation-time log-probs equal to the trainer's recomputation."""
    import torch

    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.generation.transformers_backend import generate
    from trainers.models.policy_set import PolicySet

    torch.manual_seed(0)
    config = TrainConfig.from_flat(model=str(tiny_model_dir), max_new_tokens=4, env=TOY)
    policies = PolicySet(config.model, config.policy_for_roles(["first", "second"]))

    def sampler(agent, prompts, n):
        ids = [policies.encode_prompt(m)[1] for m in prompts]
        flat = generate(policies, "shared", ids, n)
        return [flat[i * n:(i + 1) * n] for i in range(len(prompts))]

    make = toy(max_turns=2)
    result = tree_rollout(make, [0, 1], 6, sampler)
    second = [s for s in result.samples if s.agent == "second" and s.problem == 0 and s.turn == 0]
    assert len({tuple(s.completion.completion_ids) for s in second}) > 1
    env = make()
    env.reset(seed=0)
    env.step(next(s for s in result.samples if s.agent == "first" and s.problem == 0 and s.selected).text)
    for s in second:
        branch = copy.deepcopy(env)
        branch.step(s.text)
        assert branch.rewards["second"] == s.reward
    gens = [s.completion for s in result.samples]
    with torch.no_grad(), policies.active("shared") as model:
        logp, mask = policies.token_logprobs(model, [g.prompt_ids for g in gens], [g.completion_ids for g in gens])
    for row, g in enumerate(gens):
        assert len(g.logprobs) == len(g.completion_ids) == int(mask[row].sum())
        assert torch.allclose(logp[row, :len(g.logprobs)], torch.tensor(g.logprobs), atol=1e-4)


# ---------------------------------------------------------------- AEC protocol (agents finishing apart)
UNEVEN = "uneven_v0"


@pytest.fixture
def uneven(monkeypatch):
    """tests/uneven_env.py: a plain PettingZoo env (no project base class) where the sprinter
    terminates after its first action and the marathoner keeps acting for ``laps`` turns."""
    monkeypatch.setitem(ENV_MODULES, UNEVEN, "uneven_env")
    return lambda **kw: (lambda: pettingllm_envs.make(UNEVEN, **kw))


def test_the_uneven_env_is_a_valid_pettingzoo_env(uneven):
    from pettingzoo.test import api_test

    api_test(uneven(laps=3)(), num_cycles=20)


@pytest.mark.parametrize("mode", ["tree", "independent"])
def test_rollouts_keep_going_after_one_agent_is_done(uneven, mode):
    """The sprinter is done after turn 0; the AEC protocol steps it with None and the
    marathoner's later turns are still sampled (before the fix the rollout stopped there and the
    marathoner never acted)."""
    sampler = ScriptedSampler({"sprinter": ["a", "bb", "ccc"], "marathoner": ["d", "ee", "fff"]})
    if mode == "tree":
        result = tree_rollout(uneven(laps=3), [0, 1], 3, sampler)
    else:
        result = independent_rollout(uneven(laps=3), [0, 1], 3, sampler)
    turns = defaultdict(set)
    for s in result.samples:
        turns[s.agent].add(s.turn)
    assert turns == {"sprinter": {0}, "marathoner": {0, 1, 2}}
    episodes = 2 if mode == "tree" else 2 * 3
    assert len(result.samples) == episodes * (1 + 3) * (3 if mode == "tree" else 1)
    assert [agent for agent, _, _ in sampler.calls] == ["sprinter", "marathoner", "marathoner", "marathoner"]
    from uneven_env import reward_of

    assert all(s.reward == reward_of(s.text) for s in result.samples)


def test_independent_returns_follow_pettingzoo_last(uneven):
    """Each episode's per-role return is the sum of what ``env.last()`` reports to the role
    over an ``agent_iter`` loop, the early-terminated agent's final reward included."""
    from uneven_env import reward_of

    sampler = ScriptedSampler({"sprinter": ["zz"], "marathoner": ["q"]})
    result = independent_rollout(uneven(laps=2), [5], 1, sampler)
    assert result.returns == [{"sprinter": reward_of("zz"), "marathoner": 2 * reward_of("q")}]
    env = uneven(laps=2)()
    env.reset(seed=5)
    by_hand = defaultdict(float)
    for agent in env.agent_iter():
        _, reward, done, cut, _ = env.last()
        by_hand[agent] += reward
        env.step(None if done or cut else {"sprinter": "zz", "marathoner": "q"}[agent])
    assert result.returns[0] == pytest.approx(dict(by_hand))


def test_an_env_that_never_removes_its_done_agents_is_an_error_not_a_hang(uneven):
    from trainers.rollout.episodes import advance_dead

    env = uneven(laps=3)()
    env.reset(seed=0)
    env.step("a")  # the sprinter is done and selected for its None step
    env.unwrapped._was_dead_step = lambda action: None  # an env that forgets the protocol
    with pytest.raises(RuntimeError, match="kept selecting done agents"):
        advance_dead(env)
