"""The generation protocol: what every sampling backend of the trainer provides.

A backend samples completions of token-id prompts for a named policy and, after each
optimiser step, is told the policy's new weights. The trainer, the prompt-conditioned
trainer, M-GRPO and self-consistency all sample through this interface and nothing else,
so a new backend (another engine, a remote server, a pool of actors) is one module that
implements it plus one entry in :data:`trainers.generation.backends.BACKENDS`.

Shapes (all backends agree, the tests check each one):

* :meth:`Generator.generate` ``(policy, prompts, n, *, seeds)`` returns ``len(prompts) * n``
  :class:`Generation` objects, prompt-major (prompt 0's ``n`` completions first). ``seeds``
  has one seed per completion in the same order (:class:`trainers.maths.seeding.RequestSeeds`):
  a backend that honours them draws completion ``i`` from its seed alone, so the same seeds
  give the same samples whatever the batch (and the in-process and server backends give the
  same samples for the same seeds). ``seeds=None`` lets the backend use its own random stream.
* A completion ends at, and includes, the first stop id (the model learns to stop), or runs
  to the completion budget.
* ``Generation.logprobs`` are the log-probabilities the tokens were drawn with (after
  temperature scaling) when the engine reports them, else None. The trainer's PPO "old"
  policy is always its own recomputation; these only feed the truncated importance-sampling
  correction (:mod:`trainers.maths.importance_sampling`).

Weight following (:attr:`Generator.follows_updates`): True when, after :meth:`Generator.sync`,
the next ``generate`` samples the updated policy (the in-process model is the trained one;
a colocated engine gets the weights copied). A server the trainer does not control keeps
sampling the policy it was started with; the trainer refuses to train on it unless the run
opts into off-policy samples (``GenerationSettings.off_policy_generation``), never silently.

This module imports neither torch nor an engine, so actors and servers can share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

#: How a backend's per-token log-probs relate to the trained model's (what ``importance_sampling:
#: auto`` decides on): ``exact``, the trained model itself sampled (no correction needed);
#: ``engine``, another engine's kernels (truncated IS corrects the gap); ``none``, not reported.
LogprobSource = Literal["exact", "engine", "none"]


@dataclass
class Generation:
    """One sampled completion."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None
    """Log-probability of each completion token when it was sampled (after temperature
    scaling); None when the engine did not report them (a server without log-probs)."""
    text: str
    prompt_truncated: bool = False
    """The prompt was over ``max_prompt_tokens`` and had part of its history cut
    (:meth:`trainers.models.prompts.PromptEncoder.encode_prompt`)."""


@runtime_checkable
class Generator(Protocol):
    """A sampling backend (see the module docstring)."""

    follows_updates: bool
    """After :meth:`sync`, does ``generate`` sample the updated weights?"""
    logprob_source: LogprobSource
    """Where ``Generation.logprobs`` come from."""

    def generate(self, policy: str, prompts: Sequence[Sequence[int]], n: int, *,
                 seeds: Sequence[int] | None = None) -> list[Generation]:
        """``n`` completions of every prompt by policy ``policy``, prompt-major; ``seeds``:
        one per completion, or None."""
        ...

    def sync(self, policy: str, model: Any) -> None:
        """Policy ``policy`` now has the weights of ``model`` (a ``torch.nn.Module``, PEFT
        adapters active): called after every optimiser step, before the next rollout."""
        ...

    def close(self) -> None:
        """Release the engine, threads and connections (idempotent)."""
        ...


class BackendUnavailable(RuntimeError):
    """The configured backend cannot run here (a dependency or the hardware is missing); the
    message says what to install or change."""


def check_seeds(prompts: Sequence[Sequence[int]], n: int, seeds: Sequence[int] | None) -> None:
    """Raise ValueError unless ``seeds`` is None or has one seed per completion."""
    if seeds is not None and len(seeds) != len(prompts) * n:
        raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts x {n} samples")
