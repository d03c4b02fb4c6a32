"""Benchmark: tree-rollout throughput of the distributed path vs the single-process path.

Workload, identical for both: the trainer's rollout of ``--steps`` steps (``--problems``
problems x ``--n`` completions per agent step, ``--max-new-tokens`` per completion) on
``--env`` with a tiny byte-level model (``--shape``, random weights: completions are junk
text, which every env scores with its documented penalties), no update between steps (the
policy stays the same, so the figures are rollout only). The single-process path is
:class:`trainers.algorithms.atgrpo.train.Trainer`'s (envs, generation and the tree in this process); the
distributed path is :class:`trainers.distributed.trainer.DistributedTrainer`'s on a local Ray
(``--rollout-workers`` rollout workers holding the envs, ``--engines`` transformers engines
with the prompts of every call split between them). The script stops unless both paths give
the same samples (problem, agent, turn, branch, text, reward, selection) at every step.

Fairness under load: the timed steps are interleaved (single, distributed, single, ...),
the first step of each path is a warm-up, and the medians are reported. The engines run one
torch thread each; the single-process path runs ``--threads`` (default: torch's, one per
core), which on a machine shared with other jobs can be much slower than one thread
(OpenMP threads waiting on oversubscribed cores), so report runs with both. Actor start-up (Ray,
the actors' imports and model loads) is reported separately as ``setup_s``: it is paid once
per run, not per step.

Run: ``python -m benchmarks.rollout_scaling [--env plan_path_v0 --problems 8 --n 4
--max-new-tokens 16 --steps 4 --rollout-workers 2 --engines 2 --shape tiny --threads 0 --out
PATH]``. Results go to ``benchmarks/results/rollout_scaling.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.recording import result_keys, start_recording, write_results

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "rollout_scaling.json"
RESULT_KEYS = result_keys("workload", "layout", "samples_per_s", "median_step_s", "median_generate_s",
                          "single_process_torch_threads", "distributed_vs_single_process", "setup_s",
                          "identical_samples")
SHAPES: dict[str, dict[str, int]] = {
    "tiny": {"hidden_size": 64, "num_layers": 2, "num_heads": 4},
    "small": {"hidden_size": 256, "num_layers": 4, "num_heads": 4},
}


def sample_keys(result: Any) -> list[tuple[Any, ...]]:
    return [(s.problem, s.agent, s.turn, s.branch, s.text, s.reward, s.selected) for s in result.samples]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="plan_path_v0")
    parser.add_argument("--problems", type=int, default=8)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--steps", type=int, default=4, help="timed steps per path, plus one warm-up")
    parser.add_argument("--rollout-workers", type=int, default=2)
    parser.add_argument("--engines", type=int, default=2)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads of the single-process path (0: torch's default, one per core); the "
                             "engine actors use one each (Ray sets OMP_NUM_THREADS to their CPU reservation)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON goes")
    args = parser.parse_args(argv)
    recording = start_recording()

    import ray
    import torch

    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.algorithms.atgrpo.train import Trainer
    from trainers.distributed.config import DistributedConfig
    from trainers.distributed.trainer import DistributedTrainer
    from trainers.models.tiny_model import write_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        model = write_tiny_model(Path(tmp) / "model", **SHAPES[args.shape])

        def config(run: str) -> TrainConfig:
            return TrainConfig.from_flat(env=args.env, model=str(model), run_dir=str(Path(tmp) / run), device="cpu",
                                         problems_per_step=args.problems, n_samples=args.n,
                                         max_new_tokens=args.max_new_tokens, steps=args.steps + 1, eval_every=0,
                                         progress=False, tensorboard=False)

        local = Trainer(config("local"))
        layout = DistributedConfig(rollout_workers=args.rollout_workers, engines_per_policy=args.engines,
                                   local_cpus=args.rollout_workers + args.engines + 1)
        setup_start = time.perf_counter()
        remote = DistributedTrainer(config("remote"), layout)
        setup_s = time.perf_counter() - setup_start
        times: dict[str, list[float]] = {"single_process": [], "distributed": []}
        generate: dict[str, list[float]] = {"single_process": [], "distributed": []}
        samples = 0
        threads = torch.get_num_threads()
        if args.threads:
            torch.set_num_threads(args.threads)
        try:
            for step in range(args.steps + 1):
                start = time.perf_counter()
                mine = local.rollout(step)
                local_s = time.perf_counter() - start
                start = time.perf_counter()
                theirs = remote.rollout(step)
                remote_s = time.perf_counter() - start
                if sample_keys(mine) != sample_keys(theirs):
                    raise SystemExit(f"step {step}: the distributed rollout's samples differ from the local ones")
                if step > 0:  # step 0 warms up both paths
                    times["single_process"].append(local_s)
                    times["distributed"].append(remote_s)
                    generate["single_process"].append(mine.seconds_generate)
                    generate["distributed"].append(theirs.seconds_generate)
                    samples = len(mine.samples)
        finally:
            torch.set_num_threads(threads)
            remote.close()
            ray.shutdown()
    per_s = {path: samples / statistics.median(seconds) for path, seconds in times.items()}
    result = {
        "workload": {"env": args.env, "problems": args.problems, "n": args.n, "max_new_tokens": args.max_new_tokens,
                     "samples_per_step": samples, "shape": args.shape, "timed_steps": args.steps},
        "layout": {"rollout_workers": args.rollout_workers, "engines": args.engines},
        "samples_per_s": per_s,
        "median_step_s": {path: statistics.median(seconds) for path, seconds in times.items()},
        "median_generate_s": {path: statistics.median(seconds) for path, seconds in generate.items()},
        "single_process_torch_threads": args.threads or threads,
        "distributed_vs_single_process": per_s["distributed"] / per_s["single_process"],
        "setup_s": setup_s,
        "identical_samples": True,
    }
    result = write_results(args.out, result, recording)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
