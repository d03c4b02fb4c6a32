"""The policy loss: token-level PPO-clip with asymmetric clip ranges, optional k3 KL.

Pure tensor functions (no model, no optimiser), so the maths is tested against a hand
computation. Shapes: ``[B, T]`` per-token tensors, ``mask`` 1 on completion tokens.

Because updates run in micro-batches with gradient accumulation, the aggregation
normalisers (total tokens, total sequences) are those of the *whole* batch and are passed
in; summing the micro-batch losses then gives exactly the full-batch loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LossStats:
    """Diagnostics of one loss evaluation (sums, so micro-batches add up)."""

    clipped_tokens: float
    tokens: float
    kl_sum: float


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi || ref) (Schulman 2020): ``exp(d) - d - 1`` with
    ``d = ref_logp - logp``; unbiased, always >= 0, low variance for samples from pi."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, mode: str, *, total_tokens: float, total_sequences: float,
    max_len: int,
) -> torch.Tensor:
    """Reduce a ``[B, T]`` per-token loss to this micro-batch's share of the batch loss.

    ``token_mean``: sum / total_tokens (DAPO: every token weighs the same);
    ``sequence_mean``: sum_i mean_t / total_sequences (original GRPO: long answers' tokens
    weigh less); ``dr_grpo``: sum / (total_sequences * max_len) (Dr. GRPO: a constant
    normaliser, no length bias).
    """
    masked = per_token * mask
    if mode == "token_mean":
        return masked.sum() / total_tokens
    if mode == "sequence_mean":
        lengths = mask.sum(dim=1).clamp(min=1)
        return (masked.sum(dim=1) / lengths).sum() / total_sequences
    if mode == "dr_grpo":
        return masked.sum() / (total_sequences * max_len)
    raise ValueError(f"unknown aggregation {mode!r}")


def ppo_clip_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float,
    eps_high: float,
    aggregation: str,
    total_tokens: float,
    total_sequences: float,
    max_len: int,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    token_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, LossStats]:
    """PPO-clip surrogate per token, ``-min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)`` with
    ``r = exp(logp - old_logp)`` and the sequence's advantage ``A`` on each of its tokens,
    multiplied by ``token_weights`` when given (constant ``[B, T]`` importance weights, e.g.
    :func:`trainers.maths.importance_sampling.truncated_is_weights`; the KL term is not weighted),
    plus ``kl_coef * k3`` when a reference is given; aggregated as :func:`aggregate`."""
    mask = mask.to(logp.dtype)
    ratio = torch.exp(logp - old_logp)
    adv = advantages.to(logp.dtype).unsqueeze(1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    if token_weights is not None:
        per_token = per_token * token_weights.detach().to(logp.dtype)
    kl_sum = 0.0
    if ref_logp is not None and kl_coef > 0:
        kl = k3_kl(logp, ref_logp)
        per_token = per_token + kl_coef * kl
        kl_sum = float((kl.detach() * mask).sum())
    loss = aggregate(per_token, mask, aggregation, total_tokens=total_tokens, total_sequences=total_sequences,
                     max_len=max_len)
    with torch.no_grad():
        was_clipped = ((clipped < unclipped).to(logp.dtype) * mask).sum()
    return loss, LossStats(clipped_tokens=float(was_clipped), tokens=float(mask.sum()), kl_sum=kl_sum)
