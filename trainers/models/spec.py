"""What a :class:`~trainers.models.policy_set.PolicySet` is built from: :class:`ModelSpec`.

The model layer knows nothing of the trainers' configs. A trainer's config builds a spec
(``PolicyConfig.model_spec()``); the server (``pettingllm serve``) and the evaluation suite's
``hf:`` policy build one from their own options. The defaults are those of the trainers' config,
sized for a CPU smoke run with the tiny model. A bad value is a :class:`ModelSpecError`, one line
naming the field, the value and what is allowed, raised when the spec is made or, for a CUDA
device that is not there, when the models load
(:func:`~trainers.models.policy_set.resolve_device`). This module imports no torch, so a config
that builds a spec stays cheap to import and check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Floating-point formats the weights may take (``torch.<name>``).
DTYPES = ("float32", "bfloat16", "float16")
#: ``auto``, ``cpu``, ``mps``, ``cuda`` or ``cuda:<index>``.
DEVICE_PATTERN = re.compile(r"auto|cpu|mps|cuda(:\d+)?")


class ModelSpecError(ValueError):
    """A model setting that cannot work (an unknown dtype, a device that is not there); the message
    is one line naming the field, the value and what is allowed."""


@dataclass(frozen=True)
class ModelSpec:
    """The models of a :class:`~trainers.models.policy_set.PolicySet`: which weights, where, in which
    precision, trained how (full copies or LoRA adapters, their optimiser) and sampled and scored how."""

    model: str
    """Local path (or hub id when online) of a Hugging Face causal LM."""
    device: str = "auto"
    """``auto`` (cuda when available, else cpu), ``cpu``, ``mps`` or ``cuda[:i]``."""
    dtype: str = "float32"
    """Compute dtype (one of :data:`DTYPES`). Trained weights and the AdamW state stay float32 (master
    weights); lower precision runs the forwards under ``torch.autocast``; frozen weights (the LoRA
    base, the KL reference) are stored in this dtype."""
    lora: bool = False
    """One LoRA adapter per policy on a single frozen base model (PEFT) instead of full copies."""
    lora_r: int = 8
    """LoRA rank."""
    lora_alpha: int = 16
    """LoRA scaling numerator (scale = lora_alpha / lora_r)."""
    lora_target_modules: str = "all-linear"
    """Modules that get adapters: PEFT's ``all-linear`` or a comma-separated list of names."""
    gradient_checkpointing: bool = False
    """Recompute the decoder layers' activations in the backward (scoring under gradients then runs
    prompt + completion in one forward without a KV cache)."""
    logprob_chunk_size: int = 1024
    """Completion tokens per LM-head chunk when scoring (0: one chunk)."""
    shared_prefix: bool = True
    """Sample and score Llama and full-attention Qwen2 models with each prompt's keys and values
    shared by its rows (:mod:`trainers.models.shared_prefix`); False: the model's own forward, the
    reference path (slower, the same results up to float summation order). Other models always
    take their own forward."""
    temperature: float = 1.0
    """The sampling temperature; scoring uses the same one, so recorded and recomputed log-probs
    describe one distribution."""
    max_new_tokens: int = 24
    """The in-process sampler's completion budget when a call names none."""
    max_prompt_tokens: int = 4096
    """Prompts longer than this lose the middle of their history
    (:meth:`trainers.models.prompts.PromptEncoder.encode_prompt`)."""
    reference: bool = False
    """Keep the frozen initial policy for a KL term: under full fine-tuning a frozen copy of
    ``model`` is loaded; under LoRA the base with its adapters off is the reference anyway."""
    lr: float = 1e-5
    """AdamW learning rate of every policy."""
    weight_decay: float = 0.0
    """AdamW weight decay."""

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ModelSpecError(f"config field 'dtype': got {self.dtype!r}; allowed: one of {', '.join(DTYPES)}")
        if not DEVICE_PATTERN.fullmatch(self.device):
            raise ModelSpecError(f"config field 'device': got {self.device!r}; "
                                 "allowed: auto, cpu, mps, cuda or cuda:<index>")
