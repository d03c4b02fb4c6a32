"""Multi-turn GRPO through TRL's environment_factory: the model plays one role by tool calls, seats the others.

    pip install -e '.[trl]'
    python examples/trl_environment_factory.py                                  # tiny offline model, scripted partner
    python examples/trl_environment_factory.py --partner hf:runs/tiny           # an LLM seat as the partner
    python examples/trl_environment_factory.py --model Qwen/Qwen3-0.6B --env plan_path_v0 --role planner --steps 200

Each rollout is one episode: TRL appends the role's first observation to the prompt, the model
acts by calling the tool ``act(action)``, the other role (its *seat*: the env's oracle, or any
``hf:``/``openai:`` model) plays inside the call, and the reward is the role's episode return
(trainers/integrations/trl_env.py). Without ``--model`` a tiny random model is written whose
replies are tool calls with one of a few fixed answers, so the episodes, rewards and updates
run end to end in about a minute; a real model shows learning. Prints, per step, TRL's logged
reward next to the mean of the env's returns for that step's rollouts: they are equal.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from trl import GRPOConfig, GRPOTrainer

from pettingllm_envs.commandline.commands import quiet_model_libraries
from trainers.integrations.tiny_tool_model import write_tiny_tool_model
from trainers.integrations.trl_env import RolloutRecord, environment_factory, episode_dataset

#: The tiny model's candidate answers: right for train problems 0 and 1 of math_v0, and a wrong one.
TINY_ANSWERS = ["\\boxed{1200}", "\\boxed{4}", "\\boxed{7}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model id or path whose chat template TRL knows (default: a tiny model)")
    parser.add_argument("--env", default="math_v0")
    parser.add_argument("--role", default="reasoner", help="the role the model plays")
    parser.add_argument("--partner", default="scripted", help="seat spec of every other role (pettingllm_envs.seats)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("--generations", type=int, default=2)
    parser.add_argument("--max-turns", type=int, default=2)
    parser.add_argument("--gpu", action="store_true")
    args = parser.parse_args()
    quiet_model_libraries()

    with tempfile.TemporaryDirectory() as scratch:
        generation: dict[str, Any] | None = None
        model = args.model
        if model is None:
            model = str(Path(scratch) / "tiny")
            generation = write_tiny_tool_model(model, "act", "action", TINY_ANSWERS)
        records: list[RolloutRecord] = []
        env_class = environment_factory(args.env, args.role, dict.fromkeys(_other_roles(args), args.partner),
                                        max_tokens=16, on_reward=records.append, max_turns=args.max_turns)
        batch = args.generations * max(1, args.problems // args.steps)
        trainer = GRPOTrainer(
            model=model,
            environment_factory=env_class,
            train_dataset=episode_dataset(range(args.problems)),
            args=GRPOConfig(
                output_dir=str(Path(scratch) / "run"), max_steps=args.steps, per_device_train_batch_size=batch,
                num_generations=args.generations, max_completion_length=2000, max_tool_calling_iterations=4,
                generation_kwargs=generation, learning_rate=1e-2 if args.model is None else 1e-6,
                logging_steps=1, save_strategy="no", report_to="none", use_cpu=not args.gpu, bf16=False, seed=0,
                disable_tqdm=True,
            ),
        )
        trainer.train()
    logs = [entry for entry in trainer.state.log_history if "reward" in entry]
    for step, entry in enumerate(logs):
        rollouts = records[step * batch:(step + 1) * batch]
        env_mean = sum(r.reward for r in rollouts) / len(rollouts)
        print(f"step {step + 1}: reward {entry['reward']:.3f} (env returns {env_mean:.3f}), "
              f"tool calls per rollout {entry['tools/call_frequency']:.2f}")


def _other_roles(args: argparse.Namespace) -> list[str]:
    from pettingllm_envs import make

    return [r for r in make(args.env).possible_agents if r != args.role]


if __name__ == "__main__":
    main()
