"""What a :class:`~trainers.models.policy_set.PolicySet` is built from: :class:`ModelSpec`.

The model layer knows nothing of the trainers' configs: a trainer's config holds a spec as its
``model`` section (:mod:`trainers.harness.config_tree`); the server (``pettingllm serve``) and
the evaluation suite's ``hf:`` policy build one from their own options. The defaults are sized
for a CPU smoke run with the tiny model (``pettingllm tiny-model DIR``). A bad value is a
:class:`ModelSpecError`, one line naming the field, the value and what is allowed, raised when
the spec is made or, for a CUDA device that is not there, when the models load
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
    """The policies' models (the ``model`` section of a trainer's config): which weights, where, in
    which precision, trained how (full copies or LoRA adapters, their AdamW optimiser) and sampled
    and scored how."""

    model: str = ""
    """Local path (or hub id when online) of a Hugging Face causal LM with a chat template."""
    device: str = "auto"
    """``auto`` (cuda when available, else cpu), ``cpu``, ``mps`` or ``cuda[:i]``."""
    dtype: str = "float32"
    """Compute dtype. The trained weights and the AdamW state always stay float32 (master
    weights: a bfloat16 weight cannot hold an update of lr ~1e-6, its spacing near 0.02 is
    ~1e-4); ``bfloat16`` runs forwards and backwards under ``torch.autocast`` (GPUs; CPUs with
    bf16 support). Frozen weights (the LoRA base, the KL reference) are stored in this dtype.
    ``float16`` has no loss scaling here: prefer ``bfloat16``."""
    lora: bool = False
    """Train LoRA adapters (one per policy name, all on one frozen base model, via PEFT) instead of
    full copies of the model: per-role policies then cost one base model's memory."""
    lora_r: int = 8
    """LoRA rank."""
    lora_alpha: int = 16
    """LoRA scaling numerator (scale = lora_alpha / lora_r)."""
    lora_target_modules: str = "all-linear"
    """Modules that get adapters: PEFT's ``all-linear`` or a comma-separated list of names."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass instead of storing them
    (transformers' ``gradient_checkpointing_enable``): activation memory of the update drops
    from all layers to about one, for ~1/3 more compute. The update then scores prompt +
    completion in one forward without the KV cache (a cache cannot be replayed)."""
    logprob_chunk_size: int = 1024
    """Completion tokens per LM-head chunk when scoring: per-token log-probs are computed as
    ``logit[token] - logsumexp(logits)`` chunk by chunk (the chunk's logits recomputed in the
    backward), so the ``[tokens, vocab]`` logits never exist at once (at a 152k vocabulary,
    1024 tokens are 0.6 GB in float32). 0: one chunk, the whole batch (fastest for small vocabularies)."""
    shared_prefix: bool = True
    """On Llama and full-attention Qwen2 models, sample and score with each prompt's keys and values
    kept once for its n rows and the layers run as plain tensor operations
    (:mod:`trainers.models.shared_prefix`; several times faster on small models). False runs the
    model's own forward instead: the reference path, to compare against or to rule the fast path
    out; results agree up to float summation order. Other models always take their own forward."""
    temperature: float = 1.0
    """Sampling temperature; the trainer scores tokens at the same temperature so that the
    recorded old log-probs and the new ones describe one distribution."""
    max_new_tokens: int = 24
    """Completion budget per action (``dr_grpo``'s constant normaliser is sequences x this). Small
    by default so a CPU smoke run finishes in seconds."""
    max_prompt_tokens: int = 4096
    """Prompts longer than this lose the middle of their history, never the system message, the
    chat template's framing or the latest turn (:meth:`trainers.models.prompts.PromptEncoder.encode_prompt`);
    such samples carry ``prompt_truncated`` (the env already cuts very long observations)."""
    lr: float = 1e-5
    """AdamW learning rate of every policy (full fine-tuning of a real model wants ~1e-6; LoRA or
    the tiny model more). 0 makes a control run: rollouts, updates and evaluations all run and no
    weight moves, the baseline a learning curve is compared with."""
    weight_decay: float = 0.0
    """AdamW weight decay."""

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ModelSpecError(f"config field 'dtype': got {self.dtype!r}; allowed: one of {', '.join(DTYPES)}")
        if not isinstance(self.device, str) or not DEVICE_PATTERN.fullmatch(self.device):
            raise ModelSpecError(f"config field 'device': got {self.device!r}; "
                                 "allowed: auto, cpu, mps, cuda or cuda:<index>")
