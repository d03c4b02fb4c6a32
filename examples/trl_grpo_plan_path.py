"""Train plan_path_v0's planner with TRL's GRPOTrainer, on CPU, in about a minute.

    pip install -e '.[train,trl]'
    python examples/trl_grpo_plan_path.py                      # the tiny offline model
    python examples/trl_grpo_plan_path.py --model Qwen/Qwen2.5-0.5B-Instruct --steps 200 --gpu

The prompts are the planner's first observations (the scripted tool agent has already
run its program), and the reward is the env's own reward for the planner's reply (see
trainers/integrations/trl_adapter.py). The tiny model is random, so its rewards stay at the format
penalty; the run shows the pipeline end to end, a real model shows learning.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from transformers.utils.logging import enable_progress_bar
from trl import GRPOConfig, GRPOTrainer

from pettingllm_envs.commandline.commands import quiet_model_libraries
from trainers.integrations.trl_adapter import EnvRoleReward, role_prompt_dataset
from trainers.models.tiny_model import write_tiny_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model id or path (default: a freshly written tiny model)")
    parser.add_argument("--env", default="plan_path_v0")
    parser.add_argument("--role", default="planner")
    parser.add_argument("--problems", type=int, default=16, help="training problems (indices 0..N-1)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt (the GRPO group)")
    parser.add_argument("--max-completion-length", type=int, default=32)
    parser.add_argument("--gpu", action="store_true", help="train on the GPU in bf16 (default: CPU, fp32)")
    parser.add_argument("--out", default=None, help="output directory (default: a temporary one)")
    args = parser.parse_args()
    quiet_model_libraries()  # no per-file "Loading weights" bars or FutureWarnings; TRL's own bar stays

    out = Path(args.out or tempfile.mkdtemp(prefix="trl_grpo_"))
    model = args.model or str(write_tiny_model(out / "tiny_model"))
    reward = EnvRoleReward(args.env, args.role)
    config = GRPOConfig(
        output_dir=str(out / "run"),
        max_steps=args.steps,
        per_device_train_batch_size=args.generations,
        num_generations=args.generations,
        max_completion_length=args.max_completion_length,
        learning_rate=1e-4,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=False,  # transformers turns the bar off with its logging at "error"
        use_cpu=not args.gpu,
        bf16=args.gpu,
        gradient_checkpointing=args.gpu,  # saves GPU memory on real models; only slows a tiny CPU one
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=config,
        train_dataset=role_prompt_dataset(args.env, args.role, range(args.problems)),
    )
    enable_progress_bar()  # the model is loaded: the one bar left is the training loop's
    trainer.train()
    for entry in trainer.state.log_history:
        if "reward" in entry:
            print(f"step {entry['step']}: reward {entry['reward']:.3f}, "
                  f"success {entry.get(f'{reward.__name__}/success', float('nan')):.2f}")


if __name__ == "__main__":
    main()
