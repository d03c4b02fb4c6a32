"""Trainer seats: the roles named in ``seats`` are played by seats, the others train.

* rollouts (every registered env, each role seated in turn, tree and independent): the seated
  role gets no sample, its seat moves once per turn on the live path (never branched) and, in
  tree mode, once per turn in every sibling branch's continuation, and the trained role's
  samples plus what it was paid before its first action sum to everything the env paid it,
  the seat's moves included; every role's episode return is kept;
* training (the tiny model on the toy env, two steps): only the trained role has a policy,
  samples and updates, and the seated role's return is logged;
* refusals: an unknown role, every role seated, a person as a seat, policy_map for a seated
  role, a malformed ``role=SPEC``, an unknown spec, a trainer whose rollout plays no seats.
"""

from __future__ import annotations

import json
import random
import string
from collections import defaultdict

import pytest

import pettingllm_envs
from pettingllm_envs.policies import scripted_policy
from trainers.rollout.episodes import advance_dead, episode_over, independent_rollout
from trainers.rollout.seated import TrainerSeats, seated_tree_rollout

JUNK = ["", "no idea", "\x00\x01 garbage ]]]", "ANSWER: 7\nMOVES: U\nMOVE: 1"]


class Text:
    def __init__(self, text: str) -> None:
        self.text = text


def reference_episode(env_id: str, problem: int, seated: str):
    """One episode on the env itself: ``seated`` played by the oracle, the other roles by the
    oracle with junk now and then. Returns the trained roles' actions in order, the seat's
    number of moves (all, and those before any trained action) and what the env paid each role."""
    oracle, rng = scripted_policy(env_id), random.Random(problem)
    env = pettingllm_envs.make(env_id)
    env.reset(seed=problem, options={"split": "train"})
    actions, seat_moves, opening_moves, paid = [], 0, 0, defaultdict(float)
    while True:
        advance_dead(env)
        if episode_over(env):
            break
        agent = env.agent_selection
        text = oracle(env.observe(agent), agent, env.infos[agent])
        if agent == seated:
            seat_moves += 1
            opening_moves += not actions
        elif rng.random() < 0.3:
            text = rng.choice(JUNK)
        if agent != seated:
            actions.append((agent, text))
        env.step(text)
        for role, reward in env.rewards.items():
            paid[role] += reward
    return actions, seat_moves, opening_moves, dict(paid)


class Replay:
    """A sampler playing the recorded actions back, ``n`` copies each."""

    def __init__(self, actions):
        self.queues = defaultdict(list)
        for agent, text in actions:
            self.queues[agent].append(text)
        self.calls = defaultdict(int)

    def __call__(self, agent, prompts, n):
        assert len(prompts) == 1
        text = self.queues[agent][self.calls[agent]]
        self.calls[agent] += 1
        return [[Text(text)] * n]


class CountingSeat:
    def __init__(self, env_id: str) -> None:
        self.oracle, self.moves = scripted_policy(env_id), 0

    def __call__(self, observation, agent, info):
        self.moves += 1
        return self.oracle(observation, agent, info)


@pytest.mark.parametrize("env_id", pettingllm_envs.list_envs())
@pytest.mark.parametrize("seated_index", [0, 1], ids=["first_role_seated", "second_role_seated"])
@pytest.mark.parametrize("mode", ["tree", "independent"])
def test_the_trained_roles_samples_carry_all_the_env_paid_them_and_the_seat_gets_none(env_id, seated_index, mode):
    problem = 2
    seated = pettingllm_envs.make(env_id).possible_agents[seated_index]
    actions, seat_moves, opening_moves, paid = reference_episode(env_id, problem, seated)
    seat = CountingSeat(env_id)
    make = lambda: pettingllm_envs.make(env_id)  # noqa: E731
    n = 2 if mode == "tree" else 1
    if mode == "tree":
        result = seated_tree_rollout(make, [problem], n, Replay(actions), {seated: seat})
    else:
        result = independent_rollout(make, [problem], n, Replay(actions),
                                     advance=TrainerSeats({seated: seat}, env_id, max_tokens=8).advance(0))
    assert all(s.agent != seated for s in result.samples)
    assert len(result.samples) == len(actions) * n  # the trained actions branch n ways
    # once per turn on the live path (never branched); in tree mode the n - 1 siblings of a
    # trained node (copies of the selected branch here) play the seat's following moves too
    assert seat.moves == seat_moves + (n - 1) * (seat_moves - opening_moves)
    carried = defaultdict(float, result.paid_before_acting)
    for s in result.samples:
        if s.selected:
            carried[s.agent] += s.reward
    for role, amount in paid.items():
        if role != seated:
            assert carried[role] == pytest.approx(amount, abs=1e-9), role
    (returns,) = result.returns
    assert returns == pytest.approx({role: paid.get(role, 0.0) for role in returns}, abs=1e-9)
    assert set(paid) <= set(returns)


def test_a_seats_winning_move_charges_the_trained_players_losing_move():
    """tictactoe_v0's forced-win openings: the scripted player_o wins against a player_x that
    plays junk; the loss reaches player_x's latest sample, whose reward goes below zero."""
    env_id = "tictactoe_v0"
    make = lambda: pettingllm_envs.make(env_id)  # noqa: E731
    for problem in range(20):
        result = independent_rollout(make, [problem], 1, lambda agent, prompts, n: [[Text("MOVE: 0")]] * len(prompts),
                                     advance=TrainerSeats({"player_o": "scripted"}, env_id, max_tokens=8).advance(0))
        if result.returns[0]["player_o"] > 0:
            last = [s for s in result.samples if s.agent == "player_x"][-1]
            assert last.reward_later < 0 and last.reward < 0
            assert result.returns[0]["player_x"] < 0
            return
    raise AssertionError("the scripted player_o never won against junk")


# ------------------------------------------------------------------------------- training
TOY = "toy_bytes_v0"


def toy_config(model_dir, run_dir, **overrides):
    from trainers.algorithms.atgrpo.config import TrainConfig

    values = {
        "env": TOY, "model": str(model_dir), "run_dir": str(run_dir), "max_new_tokens": 1, "problems_per_step": 4,
        "n_samples": 4, "micro_batch_size": 64, "lr": 5e-2, "progress": False, "checkpoint_every": 0,
        "tensorboard": False, "eval_every": 0, "regime": "per_role",
        "env_kwargs": {"targets": {"first": "".join(chr(c) for c in range(128)), "second": string.ascii_lowercase}},
    }
    values.update(overrides)
    return TrainConfig.from_flat(**values)


@pytest.mark.parametrize("rollout", ["tree", "independent"])
def test_two_steps_with_a_seated_role_train_only_the_other(toy, tiny_model_dir, tmp_path, rollout):
    import torch

    from trainers.algorithms.atgrpo.train import Trainer

    dump = tmp_path / "samples.jsonl"
    trainer = Trainer(toy_config(tiny_model_dir, tmp_path / "run", steps=2, rollout=rollout, seats="second=random",
                                 dump_samples=str(dump), eval_every=2, eval_problems=2))
    assert trainer.config.rollout.seats == {"second": "random"}
    assert trainer.policies.names == ["first"]  # no policy for the seated role
    before = trainer.policies.snapshot("first")
    history = trainer.train()
    after = trainer.policies.snapshot("first")
    assert len(history) == 2
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the trained role was updated
    assert sum(m["samples/trained"] for m in history) > 0
    samples = [json.loads(line) for line in dump.read_text().splitlines()]
    assert samples and {s["agent"] for s in samples} == {"first"}
    assert {s["policy"] for s in samples} == {"first"}
    for metrics in history:
        assert "reward/agent/second" not in metrics
        assert 0.0 <= metrics["rollout/return/second"] <= 1.0  # the seat's return: its right answers
        assert "rollout/return/first" in metrics
    assert "eval/return/second" in history[-1]


# ------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(("seats", "message"), [
    ("secnd=random", "no role 'secnd'.*did you mean 'second'"),
    ("first=random,second=random", "every role .* is seated, so nothing is left to train"),
    ("second=human", "a person cannot play"),
    ("second=gpt4", "unknown policy spec 'gpt4'"),
])
def test_seats_that_cannot_train_are_refused_in_one_line(toy, tiny_model_dir, tmp_path, seats, message):
    from trainers.algorithms.atgrpo.train import Trainer
    from trainers.harness.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        Trainer(toy_config(tiny_model_dir, tmp_path, steps=1, seats=seats))
    assert not (tmp_path / "metrics.jsonl").exists()


def test_policy_map_for_a_seated_role_is_refused(toy, tiny_model_dir, tmp_path):
    from trainers.algorithms.atgrpo.train import Trainer
    from trainers.harness.errors import ConfigError

    with pytest.raises(ConfigError, match=r"\['second'\] are seated, so policy_map cannot give them a policy"):
        Trainer(toy_config(tiny_model_dir, tmp_path, steps=1, seats={"second": "random"},
                           policy_map={"first": "a", "second": "b"}))


@pytest.mark.parametrize("text", ["second", "second=", "=random", "second=random,second=scripted"])
def test_a_malformed_seats_option_is_refused(text):
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.harness.errors import ConfigError

    with pytest.raises(ConfigError, match="config field 'seats'"):
        TrainConfig.from_flat(model="m", seats=text).validate()


def test_the_command_line_takes_role_equals_spec_and_yaml():
    from trainers.algorithms.atgrpo.options import load_config

    assert load_config(["--model", "m", "--seats", "tester=scripted,coder=openai:q@http://127.0.0.1:8000/v1"]
                       ).rollout.seats == {"tester": "scripted", "coder": "openai:q@http://127.0.0.1:8000/v1"}
    assert load_config(["--model", "m", "--seats", "{tester: random}"]).rollout.seats == {"tester": "random"}


def test_a_trainer_whose_rollout_plays_no_seats_refuses_them(toy, tiny_model_dir, tmp_path):
    from trainers.algorithms.variants import PromptConditionedTrainer
    from trainers.harness.errors import ConfigError

    with pytest.raises(ConfigError, match="PromptConditionedTrainer has a rollout of its own that plays no seats"):
        PromptConditionedTrainer(toy_config(tiny_model_dir, tmp_path, steps=1, seats="second=random"))
