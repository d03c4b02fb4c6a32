"""The in-process backend: the trained model samples itself (the default, any device).

Sampling is :meth:`trainers.models.policy_set.PolicySet.generate`, the project's exact sampler (float64
inverse CDF, the log-prob of every token recorded under the distribution it was drawn from,
the KV cache of a group's prompt computed once). It reads the live policy, so an update is
visible to the next call without any copy: :meth:`TransformersGenerator.sync` has nothing to
do. Per-request seeds make each completion a function of its prompt and seed
(:func:`trainers.models.policy_set.seeded_uniforms`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.generation.backends import BACKENDS
from trainers.generation.protocol import Generation, LogprobSource
from trainers.models.policy_set import PolicySet


class TransformersGenerator:
    """:class:`trainers.generation.protocol.Generator` over a :class:`PolicySet`."""

    follows_updates = BACKENDS["transformers"].follows_updates
    logprob_source: LogprobSource = BACKENDS["transformers"].logprob_source

    def __init__(self, policies: PolicySet) -> None:
        self.policies = policies

    @classmethod
    def from_config(cls, config: TrainConfig, policies: PolicySet, *,
                    checkpoint: Path | None = None) -> TransformersGenerator:
        return cls(policies)  # the checkpoint's weights are already the policies'

    def generate(self, policy: str, prompts: Sequence[Sequence[int]], n: int, *,
                 seeds: Sequence[int] | None = None) -> list[Generation]:
        return self.policies.generate(policy, prompts, n, seeds=seeds)

    def sync(self, policy: str, model: Any) -> None:
        """Nothing to copy: the sampler is the trained model."""

    def close(self) -> None:
        """Nothing to release: the models belong to the :class:`PolicySet`."""
