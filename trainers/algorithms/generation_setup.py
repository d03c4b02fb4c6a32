"""A trainer's config bound to a generation backend: :func:`build_generator`.

The generation layer builds a backend from the config's ``generation`` section and the
policies it samples for; what it cannot read there comes from the rest of the config: the run's
seed, and whether the update will weigh tokens by the engine's log-probs (which then must come back).
"""

from __future__ import annotations

from pathlib import Path

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.generation.factory import build_backend
from trainers.generation.protocol import Generator
from trainers.generation.vllm_cpu import engine_dtype_choice
from trainers.models.policy_set import PolicySet


def generation_choices(config: TrainConfig) -> dict[str, str]:
    """What the generation backend chooses from the machine for this config, for the run's records:
    the vLLM engine's dtype and why (:func:`~trainers.generation.vllm_cpu.engine_dtype_choice`, the
    choice the engine starts with); nothing for the other backends."""
    if config.generation.generation_backend != "vllm":
        return {}
    choice = engine_dtype_choice(config.generation.vllm_dtype, config.model.dtype)
    return {"vllm_dtype": choice.dtype, "vllm_dtype_reason": choice.reason}


def build_generator(config: TrainConfig, policies: PolicySet, *, checkpoint: Path | None = None) -> Generator:
    """The backend ``config.generation.generation_backend`` names, set up for ``policies`` (the
    trainer's models, tokenizer and stop ids); ``checkpoint``: the checkpoint a resumed run starts from."""
    return build_backend(config.generation, policies, seed=config.run.seed, checkpoint=checkpoint,
                         require_logprobs=config.run.steps > 0 and config.uses_truncated_is())
