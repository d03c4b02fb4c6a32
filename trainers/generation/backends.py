"""The generation backends in one table: where each one's class lives, and what a run's config
checks about it before building one.

:data:`BACKENDS` is the only list of backends. ``GenerationSettings.generation_backend`` takes its allowed
values from it and its checks read :attr:`Backend.follows_updates` and :attr:`Backend.logprob_source`
here, so checking a config imports no engine (vLLM, torch); :func:`backend_class` imports the one a
run builds (:func:`trainers.generation.factory.build_backend`), and each backend class takes its
``follows_updates`` and ``logprob_source`` from its entry. This module imports nothing of the trainer
but the protocol, so a config that checks backend names can sit anywhere above it. Adding a backend
is its module plus one entry here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from trainers.generation.protocol import LogprobSource


@dataclass(frozen=True)
class Backend:
    """One generation backend."""

    target: str
    """``module:class`` of its :class:`~trainers.generation.protocol.Generator`, imported only when
    a run builds it, so an engine that is not installed costs nothing until then."""
    follows_updates: bool
    """:attr:`~trainers.generation.protocol.Generator.follows_updates` of the backend."""
    logprob_source: LogprobSource
    """:attr:`~trainers.generation.protocol.Generator.logprob_source` of the backend."""


#: Backend name -> :class:`Backend`.
BACKENDS: dict[str, Backend] = {
    "transformers": Backend("trainers.generation.transformers_backend:TransformersGenerator",
                            follows_updates=True, logprob_source="exact"),
    "vllm": Backend("trainers.generation.vllm_backend:VLLMGenerator", follows_updates=True, logprob_source="engine"),
    "openai": Backend("trainers.generation.openai_backend:OpenAIGenerator",
                      follows_updates=False, logprob_source="engine"),
}


def backend(name: str) -> Backend:
    """The entry of backend ``name``; ValueError naming the known ones otherwise."""
    if name not in BACKENDS:
        raise ValueError(f"unknown generation backend {name!r}; known: {', '.join(BACKENDS)}")
    return BACKENDS[name]


def backend_class(name: str) -> Any:
    """The class of backend ``name``, its module imported now (an engine may fail to import here)."""
    module, _, cls = backend(name).target.partition(":")
    return getattr(importlib.import_module(module), cls)
