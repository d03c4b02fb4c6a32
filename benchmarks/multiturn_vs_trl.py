"""Benchmark: multi-turn AT-GRPO against TRL's ``GRPOTrainer(environment_factory=...)`` on the same env.

Both sides train one role of a two-role env (plan_path_v0's ``planner``, math_v0's
``reasoner``) against the same partner, the env's scripted oracle in the other seat
(ours: ``RolloutConfig.seats``; TRL: :func:`trainers.integrations.trl_env.environment_factory`),
with the same tiny model (:func:`trainers.integrations.tiny_tool_model.write_tiny_tool_model`:
TRL needs a model that writes tool calls), the same episode length (``max_turns``), the same
problems, ``n`` rollouts per problem, fp32, temperature 1, one PPO epoch, token-mean loss
(TRL's ``dapo``), no KL, no reference model, one thread. TRL keeps every group (so does ours:
``drop_degenerate=False``).

What is measured, per side, in its own child process (so that its peak memory is its own):

* **trained tokens**: tokens that enter the loss. TRL: ``completion_mask * tool_mask`` (the
  tool results TRL splices into the completion run through the model but are masked);
  ours: the completion tokens of every trained sample.
* **wall and CPU seconds** of the timed steps (the first step of each side is a warm-up),
  per trained token and per problem group (``n`` rollouts of one problem in TRL; one tree with
  ``n`` branches per turn in ours). TRL runs first for ``--steps`` timed steps; ours then runs
  until it has trained at least as many tokens (within one step), so both train the same
  number of tokens. Ours samples ``max(1, round(TRL's trained tokens per model turn))``
  tokens per turn, so a sample is as long as one of TRL's turns.
* **tokens through the model in the update** (``update_forward_tokens``): TRL runs every
  rollout's prompt and whole completion (tool results included); ours runs each distinct
  prompt once (the ``n`` branches of a tree turn share it) and every completion.
* **rollout share**: wall seconds spent generating and stepping the env (TRL: its
  ``_generate_and_score_completions``, tool calls and rewards included; ours: generation, env and
  tree time), the rest of a step being the update.
* **peak memory**: the child's peak resident set (``ru_maxrss``) and its growth over the
  timed steps (the peak minus the resident set once the model and trainer are built).

The sides run interleaved: ``--repeats`` pairs of children, TRL then ours, one after the other, each
child recording the machine's load average when it starts and ends, so a change of load on a
shared machine falls on both sides instead of on whichever ran second. Each pair gives its ratios
(``pairs``); the entry's sides and ratios are the pair with the median wall-time ratio. The
CPU-time ratio is reported next to the wall-time one: it moves much less with the load.
Run: ``python benchmarks/multiturn_vs_trl.py [--envs plan_path_v0,math_v0]
[--problems 1 --n 4 --steps 2 --max-turns 3 --repeats 3]``. Results go to
``benchmarks/results/multiturn_vs_trl.json``. Needs TRL (``pip install -e '.[trl]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.recording import result_keys, start_recording, write_results  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "multiturn_vs_trl.json"
RESULT_KEYS = result_keys("environment", "envs")

#: Per env: the trained role, and the tiny model's candidate actions (right for some train problems, wrong for others).
ENVS: dict[str, dict[str, Any]] = {
    "plan_path_v0": {"role": "planner", "actions": ["MOVES: R R U", "MOVES: U", "MOVES: L L"]},
    "math_v0": {"role": "reasoner", "actions": ["\\boxed{1200}", "\\boxed{4}", "\\boxed{7}"]},
}
LEARNING_RATE = 1e-3


def rss_mb() -> float:
    """This process's peak resident set so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def run_trl(task: dict[str, Any]) -> dict[str, Any]:
    """TRL's side: ``steps + 1`` GRPO steps (the first a warm-up) through environment_factory."""
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from trainers.integrations.trl_env import environment_factory, episode_dataset

    env, role, n, problems = task["env"], task["role"], task["n"], task["problems"]
    other = [r for r in task["roles"] if r != role]
    env_class = environment_factory(env, role, dict.fromkeys(other, "scripted"), max_turns=task["max_turns"])
    steps: list[dict[str, float]] = []
    batches: list[dict[str, float]] = []

    class Counting(GRPOTrainer):
        """Records the trained tokens and model turns of every generated batch."""

        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            start = time.perf_counter()
            output = super()._generate_and_score_completions(inputs)
            rollout = {"rollout_wall": time.perf_counter() - start}
            mask = output["completion_mask"]
            if "tool_mask" in output:
                mask = mask * output["tool_mask"]
            calls = self._metrics["train"]["tools/call_frequency"][-1] * len(inputs)
            forwarded = float(output["prompt_mask"].sum() + output["completion_mask"].sum())
            batches.append({"trained_tokens": float(mask.sum()), "rollouts": len(inputs),
                            "model_turns": len(inputs) + calls, "update_forward_tokens": forwarded, **rollout})
            return output

    class Timer(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.mark = clock()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            wall, cpu = clock()
            steps.append({"wall": wall - self.mark[0], "cpu": cpu - self.mark[1]})

    args = GRPOConfig(output_dir=task["scratch"] + "/trl", use_cpu=True, per_device_train_batch_size=problems * n,
                      num_generations=n, max_completion_length=2048,
                      max_tool_calling_iterations=task["max_turns"], temperature=1.0, beta=0.0,
                      num_iterations=1, max_steps=task["steps"] + 1, learning_rate=LEARNING_RATE, report_to="none",
                      save_strategy="no", logging_steps=1000, loss_type="dapo", bf16=False,
                      gradient_checkpointing=False, dataloader_num_workers=0, disable_tqdm=True, seed=0,
                      generation_kwargs=task["generation_kwargs"])
    dataset = episode_dataset(range(problems * (task["steps"] + 1)))
    trainer = Counting(model=task["model"], environment_factory=env_class, train_dataset=dataset, args=args,
                       callbacks=[Timer()])
    built = rss_mb()
    trainer.train()
    timed, counted = steps[1:], batches[1:]
    tokens = sum(b["trained_tokens"] for b in counted)
    return summary(timed, tokens, groups=problems * len(timed), built=built,
                   extra={"rollouts": sum(b["rollouts"] for b in counted),
                          "model_turns": sum(b["model_turns"] for b in counted),
                          "update_forward_tokens": sum(b["update_forward_tokens"] for b in counted),
                          "rollout_wall_seconds": sum(b["rollout_wall"] for b in counted),
                          "trained_tokens_per_model_turn": tokens / sum(b["model_turns"] for b in counted)})


def run_ours(task: dict[str, Any]) -> dict[str, Any]:
    """Our side: AT-GRPO steps (the first a warm-up) until at least ``task["tokens"]`` trained tokens."""
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.algorithms.atgrpo.train import Trainer

    env, role, n, problems = task["env"], task["role"], task["n"], task["problems"]
    other = [r for r in task["roles"] if r != role]
    config = TrainConfig.from_flat(env=env, model=task["model"], run_dir=task["scratch"] + "/ours",
                                   problems_per_step=problems, n_samples=n, max_new_tokens=task["max_new_tokens"],
                                   micro_batch_size=problems * n * 8,
                                   env_kwargs={"max_turns": task["max_turns"]}, seats=dict.fromkeys(other, "scripted"),
                                   lr=LEARNING_RATE, drop_degenerate=False, device="cpu", steps=10_000, progress=False,
                                   tensorboard=False, checkpoint_every=0, eval_every=0, seed=0)
    trainer = Trainer(config)
    forwarded = [0.0]
    update_policies = trainer.update_policies

    def counted_update(samples: list[Any]) -> Any:
        """Counts the tokens the update runs through the model: each distinct prompt once, every completion."""
        prompts = {tuple(s.completion.prompt_ids) for s in samples}
        forwarded[0] += sum(map(len, prompts)) + sum(len(s.completion.completion_ids) for s in samples)
        return update_policies(samples)

    trainer.update_policies = counted_update
    built = rss_mb()
    steps: list[dict[str, float]] = []
    tokens = turns = samples = rollout = 0.0
    step_tokens: list[float] = []
    trainer.train_step()  # warm-up
    forwarded[0] = 0.0
    while tokens < task["tokens"] and len(steps) < task["max_steps"]:
        wall, cpu = clock()
        metrics = trainer.train_step()
        steps.append({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu})
        assert metrics["samples/trained"] == metrics["samples"]  # every sample trained, as TRL
        tokens += metrics["tokens"]
        step_tokens.append(metrics["tokens"])
        samples += metrics["samples"]
        rollout += metrics["time/generate"] + metrics["time/env"] + metrics["time/tree"]
        turns += metrics["samples"] / n  # one turn of one tree is a group of n branches
    return summary(steps, tokens, groups=problems * len(steps), built=built,
                   extra={"samples": samples, "model_turns": samples, "tree_turns": turns, "step_tokens": step_tokens,
                          "update_forward_tokens": forwarded[0], "rollout_wall_seconds": rollout,
                          "max_new_tokens": task["max_new_tokens"]})


def summary(steps: list[dict[str, float]], tokens: float, *, groups: int, built: float,
            extra: dict[str, Any]) -> dict[str, Any]:
    wall = sum(s["wall"] for s in steps)
    cpu = sum(s["cpu"] for s in steps)
    peak = rss_mb()
    return {"load_average_after": os.getloadavg(), "steps": len(steps), "trained_tokens": tokens,
            "problem_groups": groups, "wall_seconds": wall, "cpu_seconds": cpu,
            "wall_ms_per_trained_token": 1000 * wall / tokens,
            "cpu_ms_per_trained_token": 1000 * cpu / tokens, "wall_seconds_per_problem_group": wall / groups,
            "cpu_seconds_per_problem_group": cpu / groups, "peak_rss_mb": peak, "rss_growth_mb": peak - built,
            **extra}


def child(side: str, task: dict[str, Any]) -> dict[str, Any]:
    """Run one side in a fresh interpreter; its JSON result is the last line of its output."""
    done = subprocess.run([sys.executable, __file__, "--side", side, "--task", json.dumps(task)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{side} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare(env: str, problems: int, n: int, steps: int, max_turns: int, repeats: int,
            scratch: Path) -> dict[str, Any]:
    from pettingllm_envs import make
    from trainers.integrations.tiny_tool_model import write_tiny_tool_model

    spec = ENVS[env]
    probe = make(env)
    roles = list(probe.possible_agents)
    probe.close()
    model = scratch / env / "model"
    generation_kwargs = write_tiny_tool_model(model, "act", "action", spec["actions"])
    task = {"env": env, "role": spec["role"], "roles": roles, "model": str(model), "problems": problems, "n": n,
            "steps": steps, "max_turns": max_turns, "generation_kwargs": generation_kwargs}
    pairs = []
    for index in range(repeats):
        runs = {**task, "scratch": str(scratch / env / f"pair_{index}")}  # each pair's own output dirs
        trl = child("trl", runs)
        per_turn = max(1, round(trl["trained_tokens_per_model_turn"]))
        ours = child("ours", {**runs, "tokens": trl["trained_tokens"], "max_new_tokens": per_turn,
                              "max_steps": 20 * steps})
        pairs.append({"ours": ours, "trl": trl, **ratios(trl, ours)})
    median = sorted(pairs, key=lambda pair: pair["speedup_per_trained_token"])[(len(pairs) - 1) // 2]
    return {"role": spec["role"], "partner": "scripted", "problems_per_step": problems, "n": n, "max_turns": max_turns,
            **median, "pairs": [ratios(pair["trl"], pair["ours"]) for pair in pairs]}


def ratios(trl: dict[str, Any], ours: dict[str, Any]) -> dict[str, float]:
    """TRL's cost over ours (speed-ups) and our peak memory over TRL's, for one pair of runs."""
    return {"speedup_per_trained_token": trl["wall_ms_per_trained_token"] / ours["wall_ms_per_trained_token"],
            "speedup_per_trained_token_cpu": trl["cpu_ms_per_trained_token"] / ours["cpu_ms_per_trained_token"],
            "speedup_per_problem_group": trl["wall_seconds_per_problem_group"] / ours["wall_seconds_per_problem_group"],
            "memory_ratio": ours["peak_rss_mb"] / trl["peak_rss_mb"]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default=",".join(ENVS), help=f"comma-separated, from {sorted(ENVS)}")
    parser.add_argument("--problems", type=int, default=1, help="problems per step")
    parser.add_argument("--n", type=int, default=4, help="rollouts (TRL) / branches (ours) per problem")
    parser.add_argument("--steps", type=int, default=2, help="TRL's timed steps (after one warm-up)")
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3, help="pairs of runs (TRL, then ours), interleaved")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--side", choices=["trl", "ours"], help=argparse.SUPPRESS)
    parser.add_argument("--task", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    import torch

    if args.side is not None:  # a child process: the thread count is its own
        from pettingllm_envs.commandline.commands import quiet_model_libraries

        torch.set_num_threads(1)
        quiet_model_libraries()
        load = os.getloadavg()
        result = {"load_average_before": load, **(run_trl if args.side == "trl" else run_ours)(json.loads(args.task))}
        print(json.dumps(result))
        return result
    recording = start_recording()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    # each child's thread count, and how many interleaved pairs each env ran
    results: dict[str, Any] = {"environment": {"torch_threads": 1, "repeats": args.repeats}, "envs": {}}
    with tempfile.TemporaryDirectory() as scratch:
        for env in args.envs.split(","):
            results["envs"][env] = compare(env, args.problems, args.n, args.steps, args.max_turns, args.repeats,
                                           Path(scratch))
            print(json.dumps({env: results["envs"][env]}, indent=2), flush=True)
    return write_results(args.out, results, recording)


if __name__ == "__main__":
    main()
