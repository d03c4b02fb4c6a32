"""One factory for the generation backends: :func:`build_backend` builds the backend named in
:class:`GeneratorOptions`, from the table :data:`trainers.generation.backends.BACKENDS`.

A backend is a class implementing :class:`trainers.generation.protocol.Generator` with a
``from_config(options, policies, *, checkpoint)`` class method. Its module is imported only when
it is built, so an engine that is not installed costs nothing until a run asks for it (and then
fails with :class:`~trainers.generation.protocol.BackendUnavailable` saying what to install).
The options are explicit: a trainer's config is bound to them one layer up
(:func:`trainers.algorithms.generation_setup.build_generator`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from trainers.generation.backends import backend_class

if TYPE_CHECKING:
    from trainers.generation.protocol import Generator
    from trainers.models.policy_set import PolicySet


@dataclass(frozen=True)
class GeneratorOptions:
    """How to build a backend beside the policies it samples for (their tokenizer and stop ids).
    An engine outside the trainer's models loads and samples the model itself, so the model, its
    precision and the sampling settings are here too, as the policies' spec has them."""

    backend: str = "transformers"
    """A name of :data:`~trainers.generation.backends.BACKENDS`."""
    model: str = ""
    """The model an engine loads (vLLM), or that a server knows when ``openai_model`` is empty."""
    lora: bool = False
    """The trained policies are LoRA adapters (an engine then loads the base and gets merged weights)."""
    dtype: str = "float32"
    """An engine's compute dtype."""
    temperature: float = 1.0
    """Sampling temperature."""
    max_new_tokens: int = 24
    """Completion budget."""
    seed: int = 0
    """An engine's own random seed (requests with seeds do not use it)."""
    vllm_gpu_memory_utilization: float = 0.3
    """Share of GPU memory a vLLM engine may take."""
    vllm_max_model_len: int = 0
    """Longest prompt + completion a vLLM engine serves; 0: the model's own limit."""
    vllm_kv_cache_gib: float = 0.0
    """A vLLM engine's KV cache in GiB; 0: vLLM's default."""
    vllm_enforce_eager: bool = False
    """Run a vLLM engine without compilation or graph capture (faster start, slower generation)."""
    vllm_dtype: str = ""
    """A vLLM engine's compute dtype; empty or ``auto``: chosen for the device
    (:func:`~trainers.generation.vllm_cpu.choose_engine_dtype`)."""
    openai_base_url: str = ""
    """Server root including ``/v1`` (``openai``)."""
    openai_model: str = ""
    """The model name the server knows; empty: ``model``."""
    openai_concurrency: int = 8
    """Requests in flight to the server."""
    require_logprobs: bool = False
    """Refuse server answers without per-token log-probs (a run that weighs tokens by them)."""


def build_backend(options: GeneratorOptions, policies: PolicySet, *, checkpoint: Path | None = None) -> Generator:
    """The backend ``options.backend`` names, set up for ``policies`` (the trainer's models,
    tokenizer and stop ids); ``checkpoint``: the checkpoint a resumed run starts from."""
    generator: Generator = backend_class(options.backend).from_config(options, policies, checkpoint=checkpoint)
    return generator
