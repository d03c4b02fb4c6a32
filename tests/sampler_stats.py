"""Statistics for the sampler tests: draws from one distribution, Pearson's test, Poisson bands,
and the tokens a float32 inverse CDF cannot reach."""

from __future__ import annotations

import math

import torch

from trainers.generation.sampling import sample_categorical


def float32_unreachable(probs: torch.Tensor) -> torch.Tensor:
    """Tokens of positive probability that float32 inverse-CDF sampling can never draw: their
    entry adds nothing to the float32 running sum (the old sampler's defect)."""
    cdf = probs.float().cumsum(-1)
    return (probs > 0) & (cdf == torch.cat([torch.zeros(1), cdf[:-1]]))


def draw_many(probs: torch.Tensor, draws: int, rows: int = 256) -> torch.Tensor:
    """``draws`` tokens from the one distribution ``probs`` ``[V]``, ``rows`` per sampler call."""
    return torch.cat([sample_categorical(probs[None].expand(rows, -1)) for _ in range(draws // rows)])


def chi_square_p_value(counts: torch.Tensor, probs: torch.Tensor, min_expected: float = 20.0) -> float:
    """Pearson's test of ``counts`` against ``probs``, tokens pooled (in vocabulary order)
    into bins of at least ``min_expected`` expected draws."""
    expected = probs.double() / probs.double().sum() * counts.sum()
    bins = (expected.cumsum(0) / min_expected).floor().long()  # a new bin every min_expected of expectation
    bins = bins.clamp(max=max(int(bins[-1]) - 1, 0))  # the remainder joins the last full bin
    observed = torch.zeros(int(bins[-1]) + 1, dtype=torch.float64).index_add_(0, bins, counts.double())
    wanted = torch.zeros_like(observed).index_add_(0, bins, expected)
    keep = wanted > 0
    statistic = float(((observed[keep] - wanted[keep]) ** 2 / wanted[keep]).sum())
    return chi_square_survival(statistic, int(keep.sum()) - 1)


def chi_square_survival(statistic: float, dof: int) -> float:
    """P(X >= statistic) for X ~ chi2(dof), by the Wilson-Hilferty cube-root normal
    approximation (accurate to ~1e-3 in the p-value from a few degrees of freedom on)."""
    scale = 2.0 / (9.0 * dof)
    z = ((statistic / dof) ** (1.0 / 3.0) - (1.0 - scale)) / math.sqrt(scale)
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def poisson_bounds(mean: float) -> tuple[float, float]:
    """A band for a Poisson count with false alarms below ~1e-6: +-5 sigma, and at least one
    event when none has probability ``exp(-mean)`` < 1e-6."""
    low = mean - 5 * math.sqrt(mean) - 1
    if math.exp(-mean) < 1e-6:
        low = max(low, 1.0)
    return low, mean + 5 * math.sqrt(mean) + 1
