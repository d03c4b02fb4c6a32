"""Generation backends behind one protocol (:mod:`trainers.generation.protocol`), built by
:func:`trainers.generation.factory.build_generator` from the run's config."""

from trainers.generation.backends import BACKENDS
from trainers.generation.factory import build_generator
from trainers.generation.protocol import BackendUnavailable, Generation, Generator

__all__ = ["BACKENDS", "BackendUnavailable", "Generation", "Generator", "build_generator"]
