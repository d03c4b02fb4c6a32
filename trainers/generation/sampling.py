"""Exact categorical sampling: one token per row from a probability vector, with one float64 uniform.

The in-process sampler (:mod:`trainers.generation.transformers_backend`) draws every token with
:func:`sample_categorical`; with per-request seeds each completion's uniforms come from its own
stream (:func:`seeded_uniforms`), so a completion is a function of its prompt and its seed alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

#: Vocabulary entries per block of the two-level sampler; vocabularies up to ``_DIRECT_VOCAB`` take one level.
_SAMPLER_BLOCK = 256
_DIRECT_VOCAB = 4096


def sample_categorical(probs: torch.Tensor, draw: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row of ``probs`` ``[B, V]`` (rows need not sum to 1): inverse-CDF
    sampling with one float64 uniform per row, exact on any vocabulary. ``draw``: the rows'
    uniforms in [0, 1) ``[B, 1]`` float64 (per-request seeded streams); None draws them from
    torch's global generator.

    The plain way, a float32 cumulative sum and a float32 uniform, has a resolution of ~6e-8
    where the sum is near 1: on a real LM's 50k-150k vocabulary tens of thousands of tail
    tokens add nothing to the running sum and could never be drawn (~1e-4 to 1e-3 of the
    mass, and the rest off by as much in total variation). Here the cumulative sums and the
    uniform are float64 (resolution 2^-53), so every token's chance is its probability up to
    the float32 rounding of the probability itself. To stay fast on large vocabularies it
    runs in two levels: float32 sums of blocks of 256 entries (each a short sum, exact to
    ~1e-7 relative), a float64 cumulative sum over the blocks to pick one, and a float64
    cumulative sum inside the chosen block. That reads ``probs`` once; ``torch.multinomial``
    draws one exponential per entry (``B x V`` random numbers per token on CPU) and a float64
    cumulative sum over all of ``V`` converts and writes ``B x V`` doubles; both are ~10x slower
    at V = 152k. Zero-probability entries (and blocks) are never picked: ``searchsorted(right=True)``
    returns the first index whose cumulative mass exceeds the draw, a zero entry adds no mass,
    and the rounding edge cases are clamped to the last entry with mass."""
    rows, vocab = probs.shape
    if draw is None:
        draw = torch.rand(rows, 1, device=probs.device, dtype=torch.float64)
    if vocab <= _DIRECT_VOCAB:
        return _inverse_cdf(probs.to(torch.float64), draw).squeeze(1)
    block = _SAMPLER_BLOCK
    whole = vocab - vocab % block
    masses = [probs[:, :whole].view(rows, -1, block).sum(dim=-1)]
    if whole < vocab:
        masses.append(probs[:, whole:].sum(dim=-1, keepdim=True))
    mass = torch.cat(masses, dim=1).to(torch.float64)
    chosen, fraction = _inverse_cdf(mass, draw, residual=True)
    index = chosen * block + torch.arange(block, device=probs.device)
    inside = probs.gather(1, index.clamp(max=vocab - 1)).to(torch.float64) * (index < vocab)
    return (chosen * block + _inverse_cdf(inside, fraction)).squeeze(1)


def seeded_uniforms(seeds: Sequence[int], steps: int, device: torch.device) -> torch.Tensor:
    """``[len(seeds), steps]`` float64 uniforms in [0, 1): row ``i`` is the first ``steps``
    draws of a torch generator seeded with ``seeds[i]``. The sampler takes token ``t``'s
    uniform from column ``t``, so a completion is a function of its prompt and its seed, the
    same whichever requests share its batch (and a shorter budget gives a prefix)."""
    generator = torch.Generator()
    rows = []
    for seed in seeds:
        generator.manual_seed(seed)
        rows.append(torch.rand(steps, dtype=torch.float64, generator=generator))
    return torch.stack(rows).to(device)


def _inverse_cdf(weights: torch.Tensor, draw: torch.Tensor, *, residual: bool = False) -> Any:
    """Per row of float64 ``weights`` ``[B, N]``: the index ``[B, 1]`` where ``draw`` (a
    uniform in [0, 1) ``[B, 1]``) falls in the cumulative distribution; with ``residual``
    also where inside that entry's interval, as a fraction in [0, 1) (a fresh uniform for a
    second level, exact because the draw is uniform within the interval)."""
    cdf = weights.cumsum(dim=-1)
    total = cdf[:, -1:]
    target = draw * total
    last_with_mass = (cdf < total).sum(dim=-1, keepdim=True)  # the final entry that adds mass
    index = torch.searchsorted(cdf, target, right=True).clamp(max=last_with_mass)
    if not residual:
        return index
    below = torch.where(index > 0, cdf.gather(1, (index - 1).clamp(min=0)), torch.zeros_like(target))
    fraction = ((target - below) / weights.gather(1, index)).clamp(0.0, 1.0)
    return index, fraction
