"""TRL's environment_factory: any env as a multi-turn tool environment, partners in seats, and
real GRPOTrainer steps whose logged rewards are the env's returns."""

from __future__ import annotations

import os

import pytest
from transformers.utils import get_json_schema
from trl import GRPOConfig, GRPOTrainer

from pettingllm_envs import make
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.policies import scripted_policy
from trainers.integrations.tiny_tool_model import write_tiny_tool_model
from trainers.integrations.trl_env import EPISODE_OVER, RolloutRecord, environment_factory, episode_dataset

MATH = "math_v0"
#: Right answers of train problems 0 and 1, and a wrong one.
ANSWERS = ["\\boxed{1200}", "\\boxed{4}", "\\boxed{7}"]


def _replay(actions: tuple[tuple[str, str], ...]):
    """A policy per role that replays that role's recorded actions in order."""
    queues: dict[str, list[str]] = {}
    for role, action in actions:
        queues.setdefault(role, []).append(action)
    return {role: (lambda q: lambda observation, agent, info: q.pop(0))(queue) for role, queue in queues.items()}


def _replayed_returns(record: RolloutRecord, **config) -> dict[str, float]:
    env = make(MATH, **config)
    episode = play_episode(env, _replay(record.actions), seed=record.index, options={"split": record.split})
    return {role: episode.total_reward(role) for role in env.possible_agents}


def test_the_only_tool_is_act_with_a_schema_trl_can_render():
    env_class = environment_factory(MATH, "reasoner")
    public = sorted(name for name in vars(env_class) | vars(env_class.__mro__[1])
                    if callable(getattr(env_class, name)) and not name.startswith("_"))
    assert public == ["act", "get_reward", "reset"]
    schema = get_json_schema(env_class.act)
    assert schema["function"]["name"] == "act"
    assert schema["function"]["parameters"]["properties"]["action"]["type"] == "string"


@pytest.mark.parametrize("learners", [("reasoner",), ("reasoner", "tool")])
def test_a_rollout_through_the_tool_is_the_aec_episode(learners):
    """The oracle acting through ``act`` for one seat, or for both (one policy in two seats), earns
    exactly play_episode's returns; get_reward is the learners' summed return."""
    records: list[RolloutRecord] = []
    env = environment_factory(MATH, learners, on_reward=records.append, max_turns=3)()
    oracle = scripted_policy(MATH)
    observation = env.reset(prompt=[], index=1, split="test")
    assert ("[you now play reasoner]" in observation) == (len(learners) == 2)
    episode, calls = env.episode, 0
    while not episode.done:
        turn = episode.turn
        env.act(oracle(turn.observation, turn.agent, turn.info))
        calls += 1
    assert env.act("one more") == EPISODE_OVER
    reward = env.get_reward()
    reference = play_episode(make(MATH, max_turns=3), oracle, seed=1, options={"split": "test"})
    assert reward == pytest.approx(sum(reference.total_reward(r) for r in learners))
    assert records[0].returns == pytest.approx({r: reference.total_reward(r) for r in ("reasoner", "tool")})
    assert calls == sum(1 for agent, _ in reference.actions if agent in learners)


def test_seats_must_be_other_roles_than_the_learners():
    with pytest.raises(ValueError, match="distinct roles"):
        environment_factory(MATH, "reasoner", {"reasoner": "scripted"})
    with pytest.raises(ValueError, match="distinct roles"):
        environment_factory(MATH, "pilot")


def tool_calling_grpo(model_dir, env_class, generation, output_dir, *, problems: int, steps: int) -> GRPOTrainer:
    """TRL's GRPO on ``problems`` episodes of ``env_class``: 4 rollouts a step, 2 per problem, on the CPU."""
    return GRPOTrainer(
        model=str(model_dir),
        environment_factory=env_class,
        train_dataset=episode_dataset(range(problems)),
        args=GRPOConfig(
            output_dir=str(output_dir), max_steps=steps, per_device_train_batch_size=4, num_generations=2,
            max_completion_length=2000, max_tool_calling_iterations=2, generation_kwargs=generation,
            learning_rate=1e-2, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, bf16=False,
            seed=0,
        ),
    )


@pytest.mark.slow
def test_two_grpo_steps_through_trl_with_an_llm_seat_partner_log_the_envs_returns(tmp_path):
    """TRL's model plays the reasoner through tool calls; the tool role is an LLM seat (the tiny
    model, greedy, through ``hf:``). What TRL logs per step is the mean of the rollouts' returns,
    and each rollout's return is what replaying its actions in a fresh env pays."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    model_dir = tmp_path / "tiny"
    generation = write_tiny_tool_model(model_dir, "act", "action", ANSWERS)
    records: list[RolloutRecord] = []
    config = {"max_turns": 2}
    env_class = environment_factory(MATH, "reasoner", {"tool": f"hf:{model_dir}"}, max_tokens=8,
                                    on_reward=records.append, **config)
    trainer = tool_calling_grpo(model_dir, env_class, generation, tmp_path / "run", problems=4, steps=2)
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert len(logs) == 2 and len(records) == 8
    for step, entry in enumerate(logs):
        batch = records[4 * step: 4 * step + 4]
        assert entry[f"rewards/{MATH}_env/mean"] == pytest.approx(sum(r.reward for r in batch) / 4)
        assert entry["tools/call_frequency"] > 0
    for record in records:
        assert any(role == "reasoner" for role, _ in record.actions)  # the model acted through the tool
        assert any(role == "tool" for role, _ in record.actions)  # and so did its LLM partner
        assert record.reward == pytest.approx(_replayed_returns(record, **config)["reasoner"])
    assert len({r.reward for r in records}) > 1  # the rollouts differ: GRPO has something to learn from


@pytest.mark.slow
def test_one_trl_policy_in_both_seats(tmp_path):
    """Both roles are learners: TRL's model acts for whichever role is to move, and a GRPO step's
    logged reward is the mean of the rollouts' summed returns of both roles."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    model_dir = tmp_path / "tiny"
    generation = write_tiny_tool_model(model_dir, "act", "action", ANSWERS)
    records: list[RolloutRecord] = []
    env_class = environment_factory(MATH, ("reasoner", "tool"), on_reward=records.append, max_turns=1)
    trainer = tool_calling_grpo(model_dir, env_class, generation, tmp_path / "run", problems=2, steps=1)
    trainer.train()
    (entry,) = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert entry[f"rewards/{MATH}_env/mean"] == pytest.approx(sum(r.reward for r in records) / len(records))
    for record in records:
        assert [role for role, _ in record.actions] == ["reasoner", "tool"]  # one turn, both seats by the model
        assert all(action in ANSWERS for _, action in record.actions)  # no action was filled in: the model made both
        assert record.reward == pytest.approx(sum(_replayed_returns(record, max_turns=1).values()))
