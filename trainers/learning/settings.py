"""How one policy-gradient update runs: :class:`UpdateSettings`, the values :func:`trainers.learning.update.ppo_update`
reads, and :data:`Aggregation`, the ways its token losses become one number.

Kept apart from the update itself so that a trainer's config can name these types and build the
settings (AT-GRPO's and M-GRPO's ``config.update_settings()``) without importing torch: the update
takes the values it needs, not a whole config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: ``token_mean`` over all tokens of the batch (DAPO), ``sequence_mean`` (mean per sequence, then
#: over sequences; original GRPO) or ``dr_grpo`` (sum over tokens / (sequences * max_new_tokens);
#: Dr. GRPO, no length bias); :func:`trainers.maths.loss.aggregate` computes each.
Aggregation = Literal["token_mean", "sequence_mean", "dr_grpo"]


@dataclass(frozen=True)
class UpdateSettings:
    """How :func:`~trainers.learning.update.ppo_update` updates (a trainer's config builds them:
    ``config.update_settings()``)."""

    eps_low: float
    """Lower PPO clip range: the ratio may fall to 1 - eps_low."""
    eps_high: float
    """Upper PPO clip range (DAPO's clip-higher when larger than ``eps_low``)."""
    aggregation: Aggregation
    """``token_mean``, ``sequence_mean`` or ``dr_grpo`` (:func:`trainers.maths.loss.aggregate`)."""
    max_new_tokens: int
    """The completion budget: ``dr_grpo``'s constant normaliser is sequences x this."""
    ppo_epochs: int = 1
    """Optimiser steps per update, each over all the samples."""
    micro_batch_size: int = 4
    """Sequences per forward/backward (memory only: gradients accumulate)."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clip before every optimiser step (``inf``: no clipping)."""
    kl_coef: float = 0.0
    """Weight of the k3 KL to the frozen reference (0: no reference forward pass)."""
    drop_degenerate: bool = True
    """Leave degenerate groups' samples out (they carry no policy gradient) unless ``kl_coef > 0``."""
    truncated_is: bool = False
    """Weigh tokens by truncated importance sampling against the engine's recorded log-probs."""
    tis_cap: float = 2.0
    """The largest importance weight a token gets."""


__all__ = ["Aggregation", "UpdateSettings"]
