"""Generation backends behind one protocol (:mod:`trainers.generation.protocol`), built by
:func:`trainers.generation.factory.build_backend` from a config's ``generation`` section."""

from trainers.generation.backends import BACKENDS
from trainers.generation.factory import GenerationSettings, build_backend
from trainers.generation.protocol import BackendUnavailable, Generation, Generator

__all__ = ["BACKENDS", "BackendUnavailable", "Generation", "GenerationSettings", "Generator", "build_backend"]
