"""GPU smoke test: the trainer's CUDA path end to end, with torch, transformers and peft only (no vLLM,
network or downloaded weights). A random model of a real shape (Qwen2.5-1.5B-Instruct or Qwen3-1.7B of
:mod:`benchmarks.gpu_memory`; ``--quick``: 4 of their 28 layers) is loaded as the trainer loads it
(:class:`~trainers.models.policy_set.PolicySet`: float32 master weights, bf16 autocast, gradient
checkpointing), sharded with FSDP2 on an NCCL group (:class:`~trainers.distributed.data_parallel.DataParallelPolicy`),
updated once (:func:`~trainers.learning.update.ppo_update`: the trainer's scoring and
:func:`~trainers.maths.loss.ppo_clip_loss`, two PPO epochs), and its weights broadcast over NCCL from rank 0
into a bf16 engine-side copy on every rank and compared. Prints timings and peak memory beside
:func:`~benchmarks.gpu_memory.training_memory`'s estimate; exits 0 when every check passes, 1 on a
failure, 2 without CUDA. Run alone it is one rank, whose broadcast crosses no device (NCCL allows one rank
per GPU); under ``torchrun --nproc-per-node 2`` the weights move between two GPUs.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import random
import shutil
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SHAPE_NAMES = {"qwen2.5-1.5b": "Qwen/Qwen2.5-1.5B-Instruct", "qwen3-1.7b": "Qwen/Qwen3-1.7B"}


def write_model(directory: Path, shape: object, layers: int) -> None:
    """A byte-level BPE tokenizer without merges (one token per byte: transformers loads a Qwen2 folder's
    tokenizer as Qwen2Tokenizer whatever it declares) and a random bf16 model of ``shape``, ``layers`` deep."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

    from trainers.models.tiny_model import CHAT_TEMPLATE

    end = "<|endoftext|>"  # id 256, after the 256 bytes
    byte_level = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
                                      | {end: 256}, merges=[]))
    byte_level.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    byte_level.decoder = decoders.ByteLevel()
    PreTrainedTokenizerFast(tokenizer_object=byte_level, eos_token=end, pad_token=end,
                            chat_template=CHAT_TEMPLATE).save_pretrained(directory)
    config = AutoConfig.for_model(**{**shape.transformers_config(), "num_hidden_layers": layers},  # type: ignore[attr-defined]
                                  pad_token_id=256, eos_token_id=256)
    torch.manual_seed(0)
    with torch.device("cuda"):
        AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).save_pretrained(directory)


def join_group() -> tuple[int, int]:
    """Join (or, run alone, create) the NCCL group; returns (rank, world size)."""
    import torch
    import torch.distributed as dist

    if "RANK" not in os.environ:  # a single rank on loopback: nothing leaves the machine
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))  # a free port (free again once the probe closes)
            os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                              MASTER_PORT=str(probe.getsockname()[1]))
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device, timeout=datetime.timedelta(minutes=5))
    return dist.get_rank(), dist.get_world_size()


def run(args: argparse.Namespace, rank: int, world: int, log, model_dir: Path) -> list[str]:  # type: ignore[no-untyped-def]
    """Write, load, shard, update and sync the model in ``model_dir`` (module docstring); the failed checks."""
    import torch
    import torch.distributed as dist

    from benchmarks.gpu_memory import SHAPES, training_memory
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.distributed.data_parallel import DataParallelPolicy
    from trainers.distributed.train_worker import TrainSample, shard
    from trainers.generation.protocol import Generation
    from trainers.learning.settings import UpdateSettings
    from trainers.learning.update import trainable
    from trainers.maths.advantages import group_advantages
    from trainers.models.policy_set import PolicySet

    shape = SHAPES[SHAPE_NAMES[args.shape]]
    layers = 4 if args.quick else shape.num_layers
    failures: list[str] = []  # every check appends what it found wrong
    groups, per_group, prompt_chars, new_tokens = (4, 4, 64, 128) if args.quick else (8, 8, 1024, 512)
    clock = time.perf_counter()
    if rank == 0:
        write_model(model_dir, shape, layers)
    dist.barrier()
    config = TrainConfig.from_flat(model=str(model_dir), device=f"cuda:{torch.cuda.current_device()}",
                                   dtype="bfloat16", gradient_checkpointing=True, max_new_tokens=new_tokens, lr=1e-5,
                                   lora=args.lora, lora_r=16, lora_alpha=32, micro_batch_size=4,
                                   max_prompt_tokens=prompt_chars + 64)
    torch.manual_seed(0)
    policies = PolicySet(config.model, {"a": "policy"})
    trained = DataParallelPolicy(policies, "policy", "fsdp")
    torch.cuda.synchronize()
    log(f"{shape.name} shape, {layers} layers, random weights: written, loaded and sharded (FSDP2 over {world} "
        f"rank(s), {'LoRA' if args.lora else 'full'}) in {time.perf_counter() - clock:.1f} s")

    rng = random.Random(0)  # every rank draws the same batch and trains on its shard of it
    samples, rewards = [], []
    for _ in range(groups):
        text = "".join(rng.choice("abcdefgh ") for _ in range(prompt_chars))
        prompt = policies.encode_prompt([{"role": "user", "content": text}]).ids
        for _ in range(per_group):
            ids = [rng.randrange(3, 250) for _ in range(rng.randint(new_tokens // 2, new_tokens))]
            samples.append(Generation(list(prompt), ids, [-1.0] * len(ids), ""))
            rewards.append(float(rng.randint(0, 3)))
    advantages, degenerate, _ = group_advantages(rewards, [i // per_group for i in range(len(samples))])
    settings = UpdateSettings(eps_low=0.2, eps_high=0.28, aggregation="token_mean", ppo_epochs=2,
                              micro_batch_size=config.update.micro_batch_size, max_grad_norm=1.0,
                              importance_sampling="none")
    batch = trainable([TrainSample(*s) for s in zip(samples, advantages, degenerate, strict=True)], settings)
    def own(param: torch.Tensor) -> torch.Tensor:  # this rank's shard of a parameter (FSDP2: a DTensor)
        return param.detach().to_local() if hasattr(param, "to_local") else param.detach()

    before = [own(p).clone() for p in trained.params]
    torch.cuda.reset_peak_memory_stats()
    clock = time.perf_counter()
    stats = trained.update(shard(batch, world)[rank], settings)
    torch.cuda.synchronize()
    update_s, peak = time.perf_counter() - clock, torch.cuda.max_memory_allocated()
    moved = max(float((own(p) - b).abs().max()) for p, b in zip(trained.params, before, strict=True))
    log(f"update: {len(batch)} samples, {stats.tokens:.0f} tokens on rank {rank}, loss {stats.loss:.4g}, "
        f"grad norm {stats.grad_norm:.4g}, largest weight move {moved:.3g}: {update_s:.1f} s")
    if not (torch.isfinite(torch.tensor([stats.loss, stats.grad_norm])).all() and stats.grad_norm > 0 and moved > 0):
        failures.append(f"update: loss {stats.loss}, gradient norm {stats.grad_norm}, weight move {moved}")
    # the engine side of a weight sync: a bf16 copy of the trained tensors, filled by NCCL broadcasts from rank 0
    with trained.full_weights() as model:
        current = dict(model.named_parameters())
        weights = [current[name].detach() for name in trained.trained_names]
        engine = [torch.randn_like(w, dtype=torch.bfloat16) for w in weights]
        torch.cuda.synchronize()
        clock = time.perf_counter()
        for target, source in zip(engine, weights, strict=True):
            if rank == 0:
                target.copy_(source)
            dist.broadcast(target, src=0)
        torch.cuda.synchronize()
        sync_s = time.perf_counter() - clock
        wrong = [n for n, w, e in zip(trained.trained_names, weights, engine, strict=True)
                 if not torch.equal(w.bfloat16(), e)]
    log(f"weight sync: {len(engine)} tensors, {sum(e.numel() * 2 for e in engine) / 2**30:.2f} GiB bf16 broadcast over "
        f"NCCL in {sync_s:.2f} s")
    if wrong:
        failures.append(f"weight sync: {len(wrong)} tensors differ from the trainer's, first {wrong[0]}")

    estimate = training_memory(dataclasses.replace(shape, num_layers=layers), config, world, sharded=True)
    log(f"peak GPU memory of the update: {peak / 2**30:.2f} GiB measured, {sum(estimate.values()) / 2**30:.2f} GiB "
        f"estimated by benchmarks.gpu_memory ({', '.join(f'{k} {v / 2**30:.2f}' for k, v in estimate.items())})")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/gpu_smoke.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPE_NAMES), default="qwen2.5-1.5b")
    parser.add_argument("--quick", action="store_true", help="4 layers, short sequences (well under 2 minutes)")
    parser.add_argument("--lora", action="store_true", help="train LoRA adapters (peft) instead of the full model")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        reason = "no CUDA GPU is visible" if torch.version.cuda else "this torch build has no CUDA"
        print(f"gpu_smoke: needs a CUDA GPU ({reason}); nothing was run", file=sys.stderr)
        return 2
    import torch.distributed as dist
    started = time.perf_counter()
    rank, world = join_group()

    def log(message: str) -> None:
        if rank == 0:
            print(f"[{time.perf_counter() - started:6.1f} s] {message}", flush=True)

    log(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}, {world} rank(s)")
    box = [tempfile.mkdtemp(prefix="gpu-smoke-") if rank == 0 else ""]
    dist.broadcast_object_list(box, src=0)
    try:
        failures = run(args, rank, world, log, Path(box[0]))
    except Exception as error:  # any crash is a failed smoke test, reported as one
        failures = [f"{type(error).__name__}: {error}"]
        traceback.print_exc()
    if rank == 0:
        shutil.rmtree(box[0], ignore_errors=True)
    failed = torch.tensor([len(failures)], device="cuda")
    dist.all_reduce(failed)  # every rank's failures count
    dist.destroy_process_group()
    for failure in failures:
        print(f"gpu_smoke: FAILED on rank {rank}: {failure}", file=sys.stderr)
    log(f"gpu_smoke: {int(failed)} failure(s)" if int(failed) else "gpu_smoke: OK")
    return 1 if int(failed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
