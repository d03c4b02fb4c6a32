"""How samples become a policy-gradient update: :class:`UpdateSettings` (the ``update`` section
of a trainer's config), the values :func:`trainers.learning.update.ppo_update` reads, and
:data:`Aggregation`, the ways its token losses become one number.

Kept apart from the update itself so that a trainer's config can hold these settings without
importing torch: the update takes the values it needs, not a whole config.

References cited below:

* GRPO: Shao et al. 2024, "DeepSeekMath" (group-relative advantages, no critic).
* DAPO: Yu et al. 2025 (clip-higher; dynamic sampling drops degenerate groups).
* Dr. GRPO: Liu et al. 2025, "Understanding R1-Zero-like training" (length-unbiased
  aggregation, mean-only advantages).
* k3 KL estimator: Schulman 2020, "Approximating KL divergence" (blog note).
* Truncated IS: Yao et al. 2025, "Your efficient RL framework secretly brings you off-policy RL training".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from trainers.maths.advantages import Normalize  # its one definition, with the maths

#: ``token_mean`` over all tokens of the batch (DAPO), ``sequence_mean`` (mean per sequence, then
#: over sequences; original GRPO) or ``dr_grpo`` (sum over tokens / (sequences * max_new_tokens);
#: Dr. GRPO, no length bias); :func:`trainers.maths.loss.aggregate` computes each.
Aggregation = Literal["token_mean", "sequence_mean", "dr_grpo"]
ImportanceSampling = Literal["auto", "truncated", "none"]


@dataclass(frozen=True)
class UpdateSettings:
    """How group advantages are normalised and how :func:`~trainers.learning.update.ppo_update`
    updates a policy on them: the PPO-clip loss, its aggregation and the optimiser steps."""

    normalize: Normalize = "mean_std"
    """``mean_std``: (r - mean) / (std + eps) as GRPO (Shao et al. 2024); ``mean``: r - mean, which
    Dr. GRPO (Liu et al. 2025) argues removes a difficulty bias."""
    adv_eps: float = 1e-6
    """Added to the group std so that near-degenerate groups do not blow up."""
    drop_degenerate: bool = True
    """Skip samples of degenerate groups (all rewards equal, zero advantage) in the update: they carry
    no policy gradient, only cost compute (DAPO's dynamic sampling makes the same point). Kept when
    ``kl_coef > 0`` because the KL term still applies to them."""
    eps_low: float = 0.2
    """Lower PPO clip range: the ratio may fall to 1 - eps_low."""
    eps_high: float = 0.28
    """Upper PPO clip range, larger than ``eps_low`` (DAPO clip-higher, Yu et al. 2025): lets rare
    good tokens grow faster and prevents entropy collapse."""
    kl_coef: float = 0.0
    """Weight of the k3 KL estimator (Schulman 2020) to a frozen reference policy. 0 (the default,
    as DAPO and Dr. GRPO) skips the reference forward pass entirely."""
    aggregation: Aggregation = "token_mean"
    """How token losses become one number: ``token_mean`` over all tokens of the batch (DAPO),
    ``sequence_mean`` (mean per sequence, then over sequences; original GRPO), or ``dr_grpo``
    (sum over tokens / (sequences * max_new_tokens); Liu et al. 2025, no length bias)."""
    ppo_epochs: int = 1
    """Passes over each step's samples. 1 is strictly on-policy; more passes reuse samples and make
    the clip ranges matter."""
    micro_batch_size: int = 4
    """Sequences per forward/backward; gradients accumulate over micro-batches, so this bounds
    memory without changing the update."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clip per policy; guards against spikes from rare large advantages
    (``inf``: no clipping)."""
    importance_sampling: ImportanceSampling = "auto"
    """Correction for the generation engine's log-probs differing from the trainer's
    (:mod:`trainers.maths.importance_sampling`): ``truncated`` weighs every token's policy-gradient
    term by ``min(exp(logp_trainer - logp_engine), tis_cap)`` (truncated IS, Yao et al. 2025);
    ``none`` does not; ``auto`` is ``truncated`` whenever the sampler is not the trained model
    itself (the vLLM backend's other kernels, often another precision; a server) and ``none``
    with ``transformers`` (:func:`resolved`)."""
    tis_cap: float = 2.0
    """C of truncated IS: the largest weight a token gets (>= 1; Yao et al. 2025 use 2)."""


def resolved(settings: UpdateSettings, *, exact_logprobs: bool) -> UpdateSettings:
    """``settings`` with ``importance_sampling: auto`` decided (pure): ``none`` when the sampler's
    log-probs are the trained model's own (``exact_logprobs``), else ``truncated``. The update
    takes only decided settings."""
    if settings.importance_sampling != "auto":
        return settings
    return dataclasses.replace(settings, importance_sampling="none" if exact_logprobs else "truncated")


__all__ = ["Aggregation", "ImportanceSampling", "UpdateSettings", "resolved"]
