"""Benchmark: peak memory and time of one policy update at a real model's shape: unchunked, chunked, TRL.

The model is a randomly initialised Qwen2.5-0.5B shape built from a config in code (no
download): hidden 896, 14 attention heads / 2 KV heads, MLP 4864, vocabulary 151,936, tied
embeddings; 24 layers in the real model, ``--layers`` here (default 4: a CPU step of all 24
takes minutes, and the point is the LM head's ``[tokens, vocab]`` tensors, whose size does
not depend on the depth; layers only add the same activation memory to every configuration
without checkpointing). One update is what ``trainers.algorithms.atgrpo.train.Trainer.update`` does per
micro-batch: score ``--rows`` completions of ``--completion-tokens`` tokens after a shared
``--prompt-tokens`` prompt (one GRPO group), a policy-gradient loss, backward, AdamW step.

Configurations, each in a fresh subprocess (peak RSS is a per-process high-water mark):

* ``before``: unchunked scoring, kept here as the baseline
  (:func:`old_token_logprobs`): the model's full ``[B, C, V]`` logits, a float32
  ``log_softmax`` over them, a gather; no gradient checkpointing;
* ``chunked``: :meth:`trainers.models.policy_set.PolicySet.token_logprobs` with the default
  ``logprob_chunk_size`` (1024): the LM head runs chunk by chunk, ``logit - logsumexp``,
  each chunk's logits but the first recomputed in the backward
  (:func:`trainers.models.scoring.selective_logprobs`);
* ``chunked+checkpointing``: the same with ``gradient_checkpointing``;
* ``trl``: TRL's ``GRPOTrainer`` on the same update with its memory savers on
  (:func:`run_trl`: gradient checkpointing and its fused, chunked LM head).

A warm-up step first allocates AdamW's moments; then the measured steps. Peak memory is the
process's resident-set high-water mark over the measured steps (``VmHWM``, reset through
``/proc/self/clear_refs`` after the warm-up; ``ru_maxrss``, the whole process's, where that
is unavailable), reported as the total and as the step's own: the growth over the resident
set before it (weights and AdamW state), i.e. activations, logits and gradients. Time is the
wall and the process CPU time of each measured step (CPU time is less sensitive to other
jobs on a shared machine).

Run: ``python benchmarks/trainer_memory.py [--layers 4 --rows 4 --prompt-tokens 128
--completion-tokens 512 --steps 1 --threads 2 --configurations before,chunked,chunked+checkpointing,trl]``;
results go to ``benchmarks/results/trainer_memory.json``.
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.recording import result_keys, start_recording, write_results  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "trainer_memory.json"
RESULT_KEYS = result_keys("shape", "rows", "prompt_tokens", "completion_tokens", "float32_logits_gb", "threads",
                          "results")

#: Qwen2.5-0.5B's shape (its config.json), minus the depth.
QWEN25_05B = {"hidden_size": 896, "intermediate_size": 4864, "num_attention_heads": 14, "num_key_value_heads": 2,
              "vocab_size": 151_936, "tie_word_embeddings": True, "max_position_embeddings": 32_768,
              "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6}
CONFIGURATIONS = {
    "before": {"old_scoring": True, "logprob_chunk_size": 0, "gradient_checkpointing": False},
    "chunked": {"old_scoring": False, "logprob_chunk_size": 1024, "gradient_checkpointing": False},
    "chunked+checkpointing": {"old_scoring": False, "logprob_chunk_size": 1024, "gradient_checkpointing": True},
    "trl": {"gradient_checkpointing": True},
}


def write_model(out_dir: Path, layers: int) -> Path:
    """A random Qwen2.5-0.5B-shaped model and a byte tokenizer (only its pad/eos ids are used:
    the benchmark feeds token ids directly)."""
    import torch
    from transformers import ByT5Tokenizer, Qwen2Config, Qwen2ForCausalLM

    tokenizer = ByT5Tokenizer(extra_ids=0)
    tokenizer.save_pretrained(out_dir)
    config = Qwen2Config(**QWEN25_05B, num_hidden_layers=layers, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(out_dir)
    return out_dir


def old_token_logprobs(policies: Any, model: Any, prompts: Sequence[Sequence[int]],
                       completions: Sequence[Sequence[int]]) -> tuple[Any, Any]:
    """Unchunked scoring (the baseline of :meth:`PolicySet.token_logprobs`'s chunking): prompt cache,
    then the full logits of every completion position and a float32 log-softmax over them."""
    import torch
    import torch.nn.functional as F

    from trainers.models.prompt_cache import KV_CACHE_FIELD, encode_prompts

    width = max(len(c) for c in completions)
    cache, first_logits, prompt_mask, next_position = encode_prompts(model, prompts, pad_id=policies.pad_id,
                                                                     device=policies.device)
    completion_ids = torch.tensor([list(c) + [policies.pad_id] * (width - len(c)) for c in completions])
    completion_mask = torch.tensor([[1] * len(c) + [0] * (width - len(c)) for c in completions])
    logits = first_logits[:, None]
    if width > 1:
        attention = torch.cat([prompt_mask, completion_mask[:, :-1]], dim=1)
        positions = next_position + torch.arange(width - 1)
        rest = model(input_ids=completion_ids[:, :-1], attention_mask=None if bool(attention.all()) else attention,
                     position_ids=positions, use_cache=True, **{KV_CACHE_FIELD: cache}).logits
        logits = torch.cat([logits, rest], dim=1)
    logp = F.log_softmax(logits.float() / policies.spec.temperature, dim=-1)
    return logp.gather(2, completion_ids[..., None]).squeeze(2), completion_mask.float()


def peak_rss_reset() -> bool:
    """Reset this process's RSS high-water mark (Linux >= 4.0); False where unsupported."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux


def current_rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def update_inputs(vocab: int, args: argparse.Namespace) -> tuple[list[int], list[list[int]], Any]:
    """The one GRPO group every configuration trains on: a prompt, ``rows`` completions, advantages."""
    import torch

    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, vocab, (args.prompt_tokens,), generator=generator).tolist()
    completions = torch.randint(0, vocab, (args.rows, args.completion_tokens), generator=generator).tolist()
    return prompt, completions, torch.linspace(-1.0, 1.0, args.rows)


def policy_gradient_loss(logp: Any, mask: Any, advantages: Any) -> Any:
    """The token-mean policy-gradient loss of one epoch (the PPO ratio is exactly 1)."""
    return -((logp * mask).sum(dim=1) * advantages).sum() / mask.sum()


def measure(step: Callable[[], None], steps: int) -> dict[str, Any]:
    """A warm-up step (it allocates AdamW's moments: from there on every step looks alike), then
    ``steps`` measured ones: their wall and CPU seconds and the RSS high-water mark over them."""
    def timed() -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        step()
        return time.perf_counter() - wall, time.process_time() - cpu

    warm_up = timed()
    steady = current_rss_bytes()
    resettable = peak_rss_reset()
    times = [timed() for _ in range(steps)]
    peak = peak_rss_bytes()
    return {"peak_rss_gb": peak / 1e9, "steady_rss_gb": steady / 1e9, "step_peak_gb": (peak - steady) / 1e9,
            "peak_is_of_the_steps": resettable, "warm_up_seconds": warm_up[0],
            "step_seconds": [t[0] for t in times], "step_cpu_seconds": [t[1] for t in times]}


def run_configuration(model_dir: str, name: str, args: argparse.Namespace) -> dict[str, Any]:
    """One configuration, in this (fresh) process: load, then a warm-up and ``args.steps`` updates."""
    import torch

    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.models.policy_set import PolicySet

    torch.set_num_threads(args.threads)  # a process of its own
    if name == "trl":
        return run_trl(model_dir, args)
    setting = CONFIGURATIONS[name]
    config = TrainConfig.from_flat(model=model_dir, device="cpu", lr=1e-6,
                                   logprob_chunk_size=setting["logprob_chunk_size"],
                                   gradient_checkpointing=setting["gradient_checkpointing"])
    policies = PolicySet(config.model, config.policy_for_roles(["player"]))
    prompt, completions, advantages = update_inputs(policies.models["shared"].config.vocab_size, args)
    prompts = [prompt] * args.rows
    score = old_token_logprobs if setting["old_scoring"] else type(policies).token_logprobs
    optimizer = policies.optimizers["shared"]

    def step() -> None:
        logp, mask = score(policies, model, prompts, completions)
        policy_gradient_loss(logp, mask, advantages).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    with policies.active("shared") as model:
        result = measure(step, args.steps)
    return {"configuration": name, **result,
            "parameters_m": sum(p.numel() for p in policies.parameters("shared")) / 1e6}


def trl_update(model_dir: str, args: argparse.Namespace) -> tuple[Any, Any, dict[str, Any]]:
    """TRL's ``GRPOTrainer`` set up for the update (its trainer, its model and the inputs of its
    ``compute_loss``) with its memory savers on: gradient checkpointing (TRL's default) and the
    fused, chunked LM head TRL 1.16 always installs (``add_fused_lm_head``: per-token log-probs
    and entropies from ``[4096, 32768]`` tiles, recomputed in the backward). Its loss is
    ``dapo``: the token-mean policy gradient with ratio 1, as ours; the prompt runs once per
    row (TRL has no prompt cache)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = GRPOConfig(output_dir=tempfile.mkdtemp(), use_cpu=True, per_device_train_batch_size=args.rows,
                        num_generations=args.rows, max_completion_length=args.completion_tokens, beta=0.0,
                        num_iterations=1, learning_rate=1e-6, loss_type="dapo", bf16=False, report_to="none",
                        save_strategy="no", gradient_checkpointing=CONFIGURATIONS["trl"]["gradient_checkpointing"],
                        disable_tqdm=True)
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **_: [0.0] * len(completions), args=config,
                          train_dataset=Dataset.from_list([{"prompt": "x"}] * args.rows),
                          processing_class=AutoTokenizer.from_pretrained(model_dir))
    model = trainer.model
    # what Trainer.train sets up before its first step
    trainer.current_gradient_accumulation_steps = config.gradient_accumulation_steps
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=config.gradient_checkpointing_kwargs)
    model.train()  # what Trainer.training_step does (the config's dropouts are 0)
    prompt, completions, advantages = update_inputs(model.config.vocab_size, args)
    completion_ids = torch.tensor(completions)
    inputs = {"prompt_ids": torch.tensor([prompt] * args.rows),
              "prompt_mask": torch.ones(args.rows, len(prompt), dtype=torch.long),
              "completion_ids": completion_ids, "completion_mask": torch.ones_like(completion_ids),
              "advantages": advantages, "num_items_in_batch": torch.tensor(float(completion_ids.numel()))}
    return trainer, model, inputs


def run_trl(model_dir: str, args: argparse.Namespace) -> dict[str, Any]:
    """The ``trl`` configuration: :func:`trl_update`'s loss, backward and TRL's AdamW step."""
    trainer, model, inputs = trl_update(model_dir, args)
    optimizer = trainer.create_optimizer()

    def step() -> None:
        trainer.accelerator.backward(trainer.compute_loss(model, inputs))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    result = measure(step, args.steps)
    return {"configuration": "trl", **result, "parameters_m": sum(p.numel() for p in model.parameters()) / 1e6,
            "gradient_checkpointing": bool(model.is_gradient_checkpointing)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rows", type=int, default=4, help="completions per micro-batch (one GRPO group)")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--completion-tokens", type=int, default=512)
    parser.add_argument("--steps", type=int, default=1, help="measured steps (after one warm-up step)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--configurations", default=",".join(CONFIGURATIONS))
    parser.add_argument("--child", nargs=2, metavar=("MODEL_DIR", "CONFIGURATION"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_configuration(args.child[0], args.child[1], args)))
        return 0
    recording = start_recording()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = write_model(Path(tmp), args.layers)
        forwarded = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
                     if k in ("layers", "rows", "prompt_tokens", "completion_tokens", "steps", "threads")]
        for name in args.configurations.split(","):
            out = subprocess.run([sys.executable, __file__, "--child", str(model_dir), name, *forwarded],
                                 capture_output=True, text=True, check=True, cwd=ROOT)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(result)
            print(f"{name:>22}: peak RSS {result['peak_rss_gb']:.2f} GB, of which the step's own "
                  f"{result['step_peak_gb']:.2f} GB; step {' / '.join(f'{s:.1f}' for s in result['step_seconds'])} s "
                  f"(CPU {' / '.join(f'{s:.1f}' for s in result['step_cpu_seconds'])} s)",
                  flush=True)
    logits_gb = args.rows * args.completion_tokens * QWEN25_05B["vocab_size"] * 4 / 1e9
    report = {"shape": {**QWEN25_05B, "num_hidden_layers": args.layers}, "rows": args.rows,
              "prompt_tokens": args.prompt_tokens, "completion_tokens": args.completion_tokens,
              "float32_logits_gb": logits_gb, "threads": args.threads, "results": results}
    print(f"one float32 [rows, completion, vocab] tensor: {logits_gb:.2f} GB")
    write_results(RESULTS, report, recording)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
