"""Truncated importance sampling (TIS) for a generation engine that is not the trained model.

With a separate generation engine (vLLM), the tokens are drawn from the engine's
distribution ``pi_engine``, while the PPO ratio and its "old" policy are computed by the
trainer's model ``pi_old``. The two differ (other kernels, often another precision, a
prefix cache), so the samples are slightly off-policy for the trainer, and the gap grows
with the sequence length. Yao et al. 2025 ("Your efficient RL framework secretly brings you
off-policy RL training") correct the policy-gradient term of every token by the importance
weight ``pi_old(a) / pi_engine(a)``, truncated at ``C`` so that rare tokens the engine found
much less likely than the trainer does not dominate the update (bias traded for bounded
variance):

    w_t = min(exp(logp_old_t - logp_engine_t), C)

The weight is a constant (no gradient). It multiplies the token's PPO-clip term
(:func:`trainers.maths.loss.ppo_clip_loss`'s ``token_weights``). Pure tensor maths, tested by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ISStats:
    """Sums over the real (unmasked) tokens, so micro-batches add up."""

    weight_sum: float
    truncated_tokens: float
    """Tokens whose raw weight exceeded the cap."""
    tokens: float


def truncated_is_weights(
    trainer_logp: torch.Tensor, engine_logp: torch.Tensor, mask: torch.Tensor, *, cap: float
) -> tuple[torch.Tensor, ISStats]:
    """``[B, T]`` weights ``min(exp(trainer_logp - engine_logp), cap)``, 0 on padding, detached.

    ``trainer_logp``: the trainer's log-probs of the sampled tokens before the update (PPO's
    old policy); ``engine_logp``: the log-probs the engine sampled them with (at the same
    temperature); ``mask``: 1 on completion tokens."""
    if cap < 1:
        raise ValueError(f"the truncation cap must be >= 1, got {cap}")
    if trainer_logp.shape != engine_logp.shape or trainer_logp.shape != mask.shape:
        raise ValueError(f"shapes differ: {tuple(trainer_logp.shape)}, {tuple(engine_logp.shape)}, "
                         f"{tuple(mask.shape)}")
    mask = mask.to(torch.float32)
    with torch.no_grad():
        log_ratio = (trainer_logp.float() - engine_logp.float()) * mask  # padding: ratio 1, then masked
        raw = torch.exp(log_ratio)
        weights = torch.clamp(raw, max=cap) * mask
        truncated = ((raw > cap).float() * mask).sum()
    return weights, ISStats(weight_sum=float(weights.sum()), truncated_tokens=float(truncated),
                            tokens=float(mask.sum()))


def padded_engine_logprobs(rows: Sequence[Sequence[float]], width: int, device: torch.device | str) -> torch.Tensor:
    """The engine's per-token log-probs of a micro-batch as a right-padded ``[B, width]`` tensor
    (padding 0: the mask removes it)."""
    if any(len(r) > width for r in rows):
        raise ValueError(f"a row has more log-probs than the {width} completion positions")
    return torch.tensor([list(r) + [0.0] * (width - len(r)) for r in rows], dtype=torch.float32, device=device)
