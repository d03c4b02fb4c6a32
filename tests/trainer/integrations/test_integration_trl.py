"""The TRL adapter: prompt datasets and env rewards, and real GRPOTrainer steps on the tiny model."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")
pytest.importorskip("torch")

import torch
from trl import GRPOConfig, GRPOTrainer

from pettingllm_envs.integrations import RoleEnv
from pettingllm_envs.policies import scripted_policy
from trainers.integrations.trl_adapter import EnvRoleReward, completion_text, role_prompt_dataset
from trainers.models.tiny_model import write_tiny_model

TOY = "toy_bytes_v0"


def test_prompts_are_the_roles_first_chat_messages_and_rewards_come_from_the_env():
    dataset = role_prompt_dataset("plan_path_v0", "planner", range(3), split="test")
    assert dataset["index"] == [0, 1, 2] and dataset["split"] == ["test"] * 3
    env = RoleEnv("plan_path_v0", "planner")
    oracle = scripted_policy("plan_path_v0")
    answers = []
    for row in dataset:
        observation, info = env.reset(seed=row["index"], options={"split": "test"})
        assert row["prompt"] == info["messages"]
        answers.append(oracle(observation, "planner", info))

    logged: dict[str, float] = {}
    reward = EnvRoleReward("plan_path_v0", "planner")
    assert reward.__name__ == "plan_path_v0/planner"
    completions = [[{"role": "assistant", "content": answers[0]}], answers[1], "I would rather not."]
    rewards = reward(dataset["prompt"], completions, dataset["index"], dataset["split"],
                     log_metric=logged.__setitem__)
    expected = []
    for row, completion in zip(dataset, completions, strict=True):
        env.reset(seed=row["index"], options={"split": "test"})
        expected.append(env.step(completion_text(completion))[1])
    assert rewards == expected
    assert rewards[0] > 0 and rewards[1] > 0 and rewards[2] < 0  # solved, solved, format penalty
    assert logged == {"plan_path_v0/planner/success": pytest.approx(2 / 3)}


@pytest.mark.slow
def test_grpo_trainer_steps_on_the_tiny_model_with_env_rewards(toy, tmp_path):
    """Two real GRPOTrainer steps: the env reward reaches TRL, groups are not all-equal and
    the weights move. The toy task (a printable ASCII first byte) pays a random byte-level
    model about 95/259 of the time, so a group of 8 is rarely all-equal."""
    config = {"targets": {"first": "".join(map(chr, range(32, 127))), "second": "x"}, "alpha": 0.0}
    second = {"second": lambda obs, agent, info: "x"}
    model_dir = write_tiny_model(tmp_path / "tiny")
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=EnvRoleReward(TOY, "first", second, **config),
        args=GRPOConfig(
            output_dir=str(tmp_path / "run"), max_steps=2, per_device_train_batch_size=8, num_generations=8,
            max_completion_length=1, learning_rate=1e-2, logging_steps=1, save_strategy="no", report_to="none",
            use_cpu=True, bf16=False, gradient_checkpointing=False, seed=0,
        ),
        train_dataset=role_prompt_dataset(TOY, "first", range(4), other_policies=second, **config),
    )
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert len(logs) == 2
    assert all(f"rewards/{TOY}/first/mean" in entry and f"{TOY}/first/success" in entry for entry in logs)
    assert all(0.0 <= entry["reward"] <= 1.0 for entry in logs)
    assert min(entry["frac_reward_zero_std"] for entry in logs) < 1.0
    moved = [name for name, p in trainer.model.named_parameters() if not torch.equal(p, before[name])]
    assert moved
