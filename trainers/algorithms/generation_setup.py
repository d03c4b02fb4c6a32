"""A trainer's config bound to a generation backend: :func:`build_generator`.

The generation layer builds backends from explicit :class:`~trainers.generation.factory.GeneratorOptions`
and knows no trainer config; this is the one place that reads them off a
:class:`~trainers.algorithms.atgrpo.config.TrainConfig` (the backend it names, its engine and
server fields, the sampling settings, and whether the update will weigh tokens by the engine's
log-probs, which then must come back).
"""

from __future__ import annotations

from pathlib import Path

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.generation.factory import GeneratorOptions, build_backend
from trainers.generation.protocol import Generator
from trainers.generation.vllm_cpu import engine_dtype_choice
from trainers.models.policy_set import PolicySet


def generator_options(config: TrainConfig) -> GeneratorOptions:
    """The backend options of a run's config."""
    return GeneratorOptions(
        backend=config.generation_backend, model=config.model, lora=config.lora, dtype=config.dtype,
        temperature=config.temperature, max_new_tokens=config.max_new_tokens, seed=config.seed,
        vllm_gpu_memory_utilization=config.vllm_gpu_memory_utilization, vllm_max_model_len=config.vllm_max_model_len,
        vllm_kv_cache_gib=config.vllm_kv_cache_gib, vllm_enforce_eager=config.vllm_enforce_eager,
        vllm_dtype="" if config.vllm_dtype == "auto" else config.vllm_dtype,
        openai_base_url=config.openai_base_url,
        openai_model=config.openai_model, openai_concurrency=config.openai_concurrency,
        require_logprobs=config.steps > 0 and config.uses_truncated_is())


def generation_choices(config: TrainConfig) -> dict[str, str]:
    """What the generation backend chooses from the machine for this config, for the run's records:
    the vLLM engine's dtype and why (:func:`~trainers.generation.vllm_cpu.engine_dtype_choice`, the
    choice the engine starts with); nothing for the other backends."""
    if config.generation_backend != "vllm":
        return {}
    options = generator_options(config)
    choice = engine_dtype_choice(options.vllm_dtype, options.dtype)
    return {"vllm_dtype": choice.dtype, "vllm_dtype_reason": choice.reason}


def build_generator(config: TrainConfig, policies: PolicySet, *, checkpoint: Path | None = None) -> Generator:
    """The backend ``config.generation_backend`` names, set up for ``policies`` (the trainer's
    models, tokenizer and stop ids); ``checkpoint``: the checkpoint a resumed run starts from."""
    return build_backend(generator_options(config), policies, checkpoint=checkpoint)
