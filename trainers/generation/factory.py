"""One factory for the generation backends: :func:`build_generator` builds the backend a run's
config names, from the table :data:`trainers.generation.backends.BACKENDS`.

A backend is a class implementing :class:`trainers.generation.protocol.Generator` with a
``from_config(config, policies, *, checkpoint)`` class method. Its module is imported only when
it is built, so an engine that is not installed costs nothing until a run asks for it (and then
fails with :class:`~trainers.generation.protocol.BackendUnavailable` saying what to install).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trainers.generation.backends import backend_class

if TYPE_CHECKING:
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.generation.protocol import Generator
    from trainers.models.policy_set import PolicySet


def build_generator(config: TrainConfig, policies: PolicySet, *, checkpoint: Path | None = None) -> Generator:
    """The backend ``config.generation_backend`` names, set up for ``policies`` (the trainer's
    models, tokenizer and stop ids); ``checkpoint``: the checkpoint a resumed run starts from."""
    return backend_class(config.generation_backend).from_config(config, policies, checkpoint=checkpoint)
