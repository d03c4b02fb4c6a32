"""One factory for the generation backends, with the backends in one table.

:data:`BACKENDS` is the only list of backends: ``TrainConfig.generation_backend`` takes its
allowed values from it (``trainers.config.GenerationBackend``), and :func:`build_generator`
looks the configured name up in it. A backend is a class implementing
:class:`trainers.generation.protocol.Generator` with a ``from_config(config, policies, *,
checkpoint)`` class method; adding one is its module plus one line here. Backend modules
are imported only when chosen, so an engine that is not installed costs nothing until a run
asks for it (and then fails with :class:`~trainers.generation.protocol.BackendUnavailable`
saying what to install).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainers.config import TrainConfig
    from trainers.generation.protocol import Generator
    from trainers.policy import PolicySet

#: Backend name -> ``module:class``.
BACKENDS: dict[str, str] = {
    "transformers": "trainers.generation.transformers_backend:TransformersGenerator",
    "vllm": "trainers.generation.vllm_backend:VLLMGenerator",
    "openai": "trainers.generation.openai_backend:OpenAIGenerator",
}


def backend_class(name: str) -> Any:
    """The class registered as backend ``name``; ValueError naming the known ones otherwise."""
    if name not in BACKENDS:
        raise ValueError(f"unknown generation backend {name!r}; known: {', '.join(BACKENDS)}")
    module, _, cls = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def build_generator(config: TrainConfig, policies: PolicySet, *, checkpoint: Path | None = None) -> Generator:
    """The backend ``config.generation_backend`` names, set up for ``policies`` (the trainer's
    models, tokenizer and stop ids); ``checkpoint``: the checkpoint a resumed run starts from."""
    return backend_class(config.generation_backend).from_config(config, policies, checkpoint=checkpoint)
