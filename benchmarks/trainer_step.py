"""Benchmark: one AT-GRPO trainer step vs TRL's GRPOTrainer, and the tree's own overhead.

Same tiny model (``pettingllm tiny-model``), same workload: ``prompts x n`` completions of
``max_new_tokens`` tokens per step (single-turn, single-role prompts from the same text),
temperature 1, one PPO epoch, token-mean loss, no KL. Both run in this process on CPU;
each is warmed up with one step, then the median of ``repeats`` timed steps is reported.

The second number is the share of rollout time that the tree itself costs (deep copies of
the env plus branch selection) on plan_path_v0 with the trainer's CPU defaults.

Run: ``python benchmarks/trainer_step.py [--prompts 4 --n 8 --max-new-tokens 32]``.
TRL is optional (``pip install trl``); without it only our numbers are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the toy env used as the single-turn workload
sys.path.insert(0, str(ROOT))


def ours(model_dir: Path, run_dir: Path, prompts: int, n: int, tokens: int, repeats: int) -> float:
    import pettingllm_envs
    from trainers.config import TrainConfig
    from trainers.train import Trainer

    pettingllm_envs.register("toy_bytes_v0", "toy_env")
    config = TrainConfig(env="toy_bytes_v0", model=str(model_dir), run_dir=str(run_dir), problems_per_step=prompts,
                         n_samples=n, max_new_tokens=tokens, micro_batch_size=prompts * n, progress=False,
                         tensorboard=False, checkpoint_every=0, steps=repeats + 1, lr=1e-6,
                         drop_degenerate=False, env_kwargs={"targets": {"first": "", "second": ""}})
    trainer = Trainer(config)
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        metrics = trainer.train_step()
        times.append(time.perf_counter() - start)
    assert metrics["samples/trained"] == 2 * prompts * n  # both roles, every sample updated
    # a step of ours plays 2 agents (2 x prompts x n completions); normalise to one agent step
    return statistics.median(times[1:]) / 2


def trl_step(model_dir: Path, out_dir: Path, prompts: int, n: int, tokens: int, repeats: int) -> float | None:
    try:
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as error:
        print(f"TRL not available ({error}); skipping the comparison")
        return None
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = [{"prompt": [{"role": "system", "content": "You are first. Answer with one character."},
                        {"role": "user", "content": f"Problem {i}. Turn 0."}]} for i in range(prompts * (repeats + 1))]
    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            times.append(time.perf_counter() - self.start)

    args = GRPOConfig(output_dir=str(out_dir), use_cpu=True, per_device_train_batch_size=prompts * n,
                      num_generations=n, max_completion_length=tokens, temperature=1.0, beta=0.0,
                      num_iterations=1, max_steps=repeats + 1, learning_rate=1e-6, report_to="none",
                      save_strategy="no", logging_steps=1000, loss_type="dapo", bf16=False,
                      generation_kwargs={"top_k": 0, "top_p": 1.0}, disable_tqdm=True)
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir), reward_funcs=lambda completions, **k:
                          [0.0 if i % 2 else 1.0 for i in range(len(completions))],
                          args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                          callbacks=[Timer()])
    trainer.train()
    return statistics.median(times[1:])


def tree_overhead(model_dir: Path, run_dir: Path, steps: int) -> dict[str, float]:
    from trainers.config import TrainConfig
    from trainers.train import Trainer

    trainer = Trainer(TrainConfig(model=str(model_dir), run_dir=str(run_dir), steps=steps, progress=False,
                                  tensorboard=False, checkpoint_every=0))
    history = trainer.train()
    tree = sum(m["time/tree"] for m in history)
    rollout = sum(m["time/generate"] + m["time/env"] for m in history)
    return {"tree_seconds": tree, "rollout_seconds": rollout, "tree_share": tree / rollout}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tree-steps", type=int, default=2)
    args = parser.parse_args()
    from trainers.tiny_model import write_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = write_tiny_model(Path(tmp) / "model")
        ours_s = ours(model_dir, Path(tmp) / "ours", args.prompts, args.n, args.max_new_tokens, args.repeats)
        trl_s = trl_step(model_dir, Path(tmp) / "trl", args.prompts, args.n, args.max_new_tokens, args.repeats)
        overhead = tree_overhead(model_dir, Path(tmp) / "tree", args.tree_steps)
    result = {"completions_per_step": args.prompts * args.n, "max_new_tokens": args.max_new_tokens,
              "ours_step_seconds": ours_s, "trl_step_seconds": trl_s,
              "speedup_vs_trl": (trl_s / ours_s) if trl_s else None, **overhead}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
