"""Generation backends behind one protocol (:mod:`trainers.generation.protocol`), built by
:func:`trainers.generation.factory.build_backend` from explicit options."""

from trainers.generation.backends import BACKENDS
from trainers.generation.factory import GeneratorOptions, build_backend
from trainers.generation.protocol import BackendUnavailable, Generation, Generator

__all__ = ["BACKENDS", "BackendUnavailable", "Generation", "Generator", "GeneratorOptions", "build_backend"]
