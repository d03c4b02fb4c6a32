"""Every reward an env pays a role reaches a training sample of that role.

An AEC env may pay a role while another acts (a zero-sum game pays the loser at the
winner's move; code_v0 pays the coder when the tester's tests expose its bugs; research_v0
pays the sub-agent its share of the outcome at the main agent's answer). The rollouts add
such payments to the role's latest sample (``Sample.reward_later``), except a cooperative
env's shared team credit, which the actor's own sample carries (``infos[b]["team_credit"]``).

Two kinds of checks, on real envs and real episodes:

* accounting: for every registered env and role, what the samples of one episode carry plus
  the team credit plus what was paid before the role's first action equals what the env paid
  (tree, independent and M-GRPO rollouts);
* competitive envs teach winning: from a position where the player to move can either lose at
  once or stay safe, the losing move's sample is below the safe move's.
"""

from __future__ import annotations

import copy
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import pytest

import pettingllm_envs
from pettingllm_envs.capabilities import Delegation, capability
from pettingllm_envs.core import TextAECEnv
from pettingllm_envs.policies import scripted_policy
from trainers.algorithms.mgrpo.rollout import hierarchical_rollout
from trainers.algorithms.variants import first_turn_rollout
from trainers.rollout.episodes import advance_dead, episode_over, independent_rollout, tree_rollout

JUNK = ["", "no idea", "\x00\x01 garbage ]]]", "ANSWER: 7\nMOVES: U\nMOVE: 1"]


@dataclass
class Text:
    text: str


@dataclass
class Episode:
    """One episode played directly on the env: the actions in order, and per role what the env
    paid it (every step's ``rewards``) and how much of that was shared team credit."""

    actions: list[tuple[str, str]]
    paid: dict[str, float]
    team_credit: dict[str, float]


def play(env_id: str, problem: int, choose: Callable[[TextAECEnv, str], str], **config) -> Episode:
    env = pettingllm_envs.make(env_id, **config)
    env.reset(seed=problem, options={"split": "train"})
    actions, paid, team = [], defaultdict(float), defaultdict(float)
    while True:
        advance_dead(env)
        if episode_over(env):
            break
        agent = env.agent_selection
        text = choose(env, agent)
        env.step(text)
        actions.append((agent, text))
        for role, reward in env.rewards.items():
            paid[role] += reward
            team[role] += env.infos[role].get("team_credit", 0.0)
    return Episode(actions, dict(paid), dict(team))


def mixed_policy(env_id: str, seed: int) -> Callable[[TextAECEnv, str], str]:
    """The env's oracle, with a junk action now and then (penalties must reach samples too)."""
    oracle, rng = scripted_policy(env_id), random.Random(seed)

    def choose(env, agent):
        if rng.random() < 0.3:
            return rng.choice(JUNK)
        return oracle(env.observe(agent), agent, env.infos[agent])
    return choose


class Replay:
    """A sampler that plays recorded actions back: an agent's k-th call gets its k-th action
    (``n`` copies, or ``branches[(agent, k)]`` when given: the N branches of that node)."""

    def __init__(self, actions: list[tuple[str, str]], branches: dict[tuple[str, int], list[str]] | None = None):
        self.queues: dict[str, list[str]] = defaultdict(list)
        for agent, text in actions:
            self.queues[agent].append(text)
        self.calls: dict[str, int] = defaultdict(int)
        self.ahead: dict[str, int] = defaultdict(int)  # continuation calls since the last node's
        self.branches = branches or {}

    def next(self, agent: str) -> tuple[int, str]:
        k = self.calls[agent]
        self.calls[agent] += 1
        return k, self.queues[agent][k]

    def __call__(self, agent, prompts, n):
        assert len(prompts) == 1
        self.ahead.clear()
        k, text = self.next(agent)
        return [[Text(t) for t in self.branches.get((agent, k), [text] * n)]]

    def continuation(self, agent, prompts, n):
        """A tree branch's continuation: the actions the live path plays next (an agent that acts
        again in the continuation, a retry, takes its following recorded action; past the recording
        its last one)."""
        assert n == 1
        queue = self.queues[agent]
        text = queue[min(self.calls[agent] + self.ahead[agent], len(queue) - 1)]
        self.ahead[agent] += 1
        return [[Text(text)] for _ in prompts]

    def hierarchical(self, agent, prompts, keys):
        assert len(prompts) == 1
        return [Text(self.next(agent)[1])]


def carried(result, selected_only: bool) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for s in result.samples:
        if s.selected or not selected_only:
            totals[s.agent] += s.reward
    for role, amount in result.paid_before_acting.items():
        totals[role] += amount
    return totals


@pytest.mark.parametrize("env_id", pettingllm_envs.list_envs())
@pytest.mark.parametrize("mode", ["tree", "independent"])
def test_what_the_env_paid_each_role_is_what_its_samples_carry(env_id, mode):
    problem = 3
    episode = play(env_id, problem, mixed_policy(env_id, seed=problem))
    make = lambda: pettingllm_envs.make(env_id)  # noqa: E731
    replay = Replay(episode.actions)
    if mode == "tree":  # every branch's continuation plays what the live path plays
        result = tree_rollout(make, [problem], 2, replay, continuation_sampler=replay.continuation)
    else:
        result = independent_rollout(make, [problem], 1, replay)
    assert len(result.samples) == len(episode.actions) * (2 if mode == "tree" else 1)
    totals = carried(result, selected_only=True)
    for role, paid in episode.paid.items():
        assert totals[role] + episode.team_credit[role] == pytest.approx(paid, abs=1e-9), role
    (returns,) = {tuple(sorted(r.items())) for r in result.returns}  # every payment of the live path
    assert dict(returns) == pytest.approx({role: episode.paid.get(role, 0.0) for role in dict(returns)}, abs=1e-9)
    assert set(episode.paid) <= set(dict(returns))


@pytest.mark.parametrize("env_id", pettingllm_envs.list_envs())
def test_prompt_variants_one_step_rollouts_account_for_every_role(env_id):
    """The variants' rollouts are one action of the first role: whatever that step paid the
    others is paid before they act (no sample), and the actor's sample carries its own reward."""
    problem = 1
    env = pettingllm_envs.make(env_id)
    env.reset(seed=problem, options={"split": "train"})
    agent = env.agent_selection
    first_text = scripted_policy(env_id)(env.observe(agent), agent, env.infos[agent])
    env.step(first_text)
    result = first_turn_rollout(lambda: pettingllm_envs.make(env_id), [problem], 2,
                                lambda agent, prompts, n: [[Text(first_text)] * n])
    totals = carried(result, selected_only=True)
    for role, reward in env.rewards.items():
        team = env.infos[role].get("team_credit", 0.0)
        assert totals[role] + 2 * team == pytest.approx(2 * reward, abs=1e-9), role


def test_a_competitive_env_pays_no_team_credit_and_a_cooperative_one_pays_the_actors_team_reward():
    env = pettingllm_envs.make("tictactoe_v0")
    env.reset(seed=0)
    env.step("MOVE: 1" if env.unwrapped.board[0] == "." else "MOVE: 9")
    assert env.infos["player_o"]["team_credit"] == 0.0
    math = pettingllm_envs.make("math_v0", alpha=0.5)
    math.reset(seed=0)
    reasoner = math.agent_selection
    oracle = scripted_policy("math_v0")
    math.step(oracle(math.observe(reasoner), reasoner, math.infos[reasoner]))
    last = math.infos[reasoner]["last_action"]
    (other,) = [a for a in math.agents if a != reasoner]
    assert last["reward_global"] > 0  # the right answer raised G
    assert math.infos[other]["team_credit"] == pytest.approx(0.5 * last["reward_global"])
    assert math.infos[reasoner]["team_credit"] == 0.0


def test_mgrpo_rewards_carry_what_research_v0_paid_each_role():
    """The main agent's rollout reward is its return (invalid steps' penalties included, which
    its final answer's reward alone left out); the sub's delegation rewards sum to its return."""
    delegation = capability("research_v0", Delegation)
    for problem in range(4):
        episode = play("research_v0", problem, mixed_policy("research_v0", seed=problem))
        result = hierarchical_rollout(lambda: pettingllm_envs.make("research_v0"), [problem], 1,
                                      {"main": Replay(episode.actions).hierarchical,
                                       "sub": Replay(episode.actions).hierarchical},
                                      delegation=delegation)
        (outcome,) = result.outcomes.values()
        main, sub = delegation.manager, delegation.worker
        assert outcome.main_reward == pytest.approx(episode.paid[main] - episode.team_credit[main])
        assert sum(outcome.delegation_rewards) == pytest.approx(episode.paid[sub] - episode.team_credit[sub])


# ---------------------------------------------------------------- competitive envs teach winning
def tictactoe_moves(env: TextAECEnv, agent: str) -> list[str]:
    return [f"MOVE: {i + 1}" for i, cell in enumerate(env.unwrapped.board) if cell == "."]


def textarena_moves(env: TextAECEnv, agent: str) -> list[str]:
    return list(env.infos[agent]["game"]["legal_actions"] or [])


#: (env id, config, the legal moves of the player to move). Every competitive registered env
#: (one whose team state differs by side) must be here: see the test below.
COMPETITIVE = [
    ("tictactoe_v0", {"forced_win": False}, tictactoe_moves),
    ("textarena_v0", {"game": "ConnectFour-v0"}, textarena_moves),
    ("textarena_v0", {"game": "TicTacToe-v0"}, textarena_moves),
]


def test_every_competitive_env_is_covered():
    competitive = set()
    for env_id in pettingllm_envs.list_envs():
        raw = pettingllm_envs.make(env_id).unwrapped
        if isinstance(raw, TextAECEnv) and raw.roles_compete:
            competitive.add(env_id)
    assert competitive == {env_id for env_id, _, _ in COMPETITIVE}


def wins_at_once(env: TextAECEnv, moves: Callable[[TextAECEnv, str], list[str]]) -> str | None:
    """A move of the player to move that wins the game right away, if any."""
    agent = env.agent_selection
    for move in moves(env, agent):
        after = copy.deepcopy(env)
        after.step(move)
        if after.infos[agent]["success"]:
            return move
    return None


@dataclass
class Fork:
    """A position where ``player`` can lose at once (``lose``; the opponent answers ``win``) or
    stay safe (``safe``), reached by ``prefix`` from the reset of ``problem``."""

    problem: int
    prefix: list[tuple[str, str]]
    player: str
    lose: str
    safe: str
    win: str


def find_fork(env_id: str, config: dict, moves: Callable[[TextAECEnv, str], list[str]]) -> Fork:
    rng = random.Random(0)
    for problem in range(40):
        env = pettingllm_envs.make(env_id, max_turns=30, **config)
        env.reset(seed=problem)
        prefix: list[tuple[str, str]] = []
        while not episode_over(env):
            player = env.agent_selection
            lose = safe = win = None
            for move in moves(env, player):
                after = copy.deepcopy(env)
                after.step(move)
                if episode_over(after):
                    continue
                reply = wins_at_once(after, moves)
                if reply is not None:
                    lose, win = move, reply
                elif after.infos[player]["last_action"]["valid"]:
                    safe = move
            if lose and safe and win:
                return Fork(problem, prefix, player, lose, safe, win)
            move = rng.choice(moves(env, player))
            env.step(move)
            prefix.append((player, move))
    raise AssertionError(f"no position with a losing and a safe move found in {env_id}")


def continue_play(env_id: str, config: dict, fork: Fork, move: str,
                  moves: Callable[[TextAECEnv, str], list[str]]) -> list[tuple[str, str]]:
    """The fork's prefix, ``move``, then the opponent's win when there is one, else the first
    legal move of each player until the game ends: the actions of one whole episode."""
    actions = [*fork.prefix, (fork.player, move)]
    queue = iter(actions)

    def choose(env, agent):
        recorded = next(queue, None)
        if recorded is not None:
            return recorded[1]
        return wins_at_once(env, moves) or moves(env, agent)[0]
    return play(env_id, fork.problem, choose, max_turns=30, **config).actions


@pytest.mark.parametrize(("env_id", "config", "moves"), COMPETITIVE, ids=lambda v: v if isinstance(v, str) else "")
def test_a_losing_move_is_charged_the_loss_in_every_competitive_env(env_id, config, moves):
    fork = find_fork(env_id, config, moves)
    k = sum(1 for agent, _ in fork.prefix if agent == fork.player)  # the fork is the player's k-th action
    make = lambda: pettingllm_envs.make(env_id, max_turns=30, **config)  # noqa: E731

    def fork_sample(result, branch=0, n=1):
        return [s for s in result.samples if s.agent == fork.player][k * n + branch]

    losing, safe = (independent_rollout(make, [fork.problem], 1,
                                        Replay(continue_play(env_id, config, fork, move, moves)))
                    for move in (fork.lose, fork.safe))
    lost, kept = fork_sample(losing), fork_sample(safe)
    assert lost.text == fork.lose and kept.text == fork.safe
    assert lost.reward_later < 0 and lost.reward < kept.reward

    # tree: both moves are branches of one node; the first of equal immediate rewards continues.
    # Both branches are played forward with the opponent's move (its winning reply): the loss
    # lands on the losing branch's sample, and the safe branch's continuation charges it no loss
    actions = continue_play(env_id, config, fork, fork.lose, moves)
    replay = Replay(actions, {(fork.player, k): [fork.lose, fork.safe]})
    tree = tree_rollout(make, [fork.problem], 2, replay, continuation_sampler=replay.continuation)
    lost, kept = fork_sample(tree, 0, n=2), fork_sample(tree, 1, n=2)
    assert (lost.text, kept.text) == (fork.lose, fork.safe) and lost.selected
    assert lost.reward - lost.reward_later == pytest.approx(kept.reward - kept.reward_later)  # equal immediate
    assert lost.reward_later < 0 and kept.reward_later >= 0
    assert lost.reward < kept.reward
