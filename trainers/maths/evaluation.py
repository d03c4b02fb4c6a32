"""Held-out evaluation of the policy during training, with confidence intervals (pure maths).

The training rollout's own success figure does not measure the policy: in tree mode every
agent step keeps the best of N branches, so an episode succeeds when the *search* finds a
success (``tree/success_rate``; on the same weights it was 0.146 where the policy's own rate
was 0.001). The trainer therefore evaluates the current policy every ``eval_every`` steps
with one independent episode per held-out problem (``eval_split``, problem ids
``0 .. eval_problems - 1``), sampled at the training temperature: the success probability
of the policy that is trained, which is what the RL objective raises (greedy decoding would
evaluate another policy). :func:`evaluation_metrics` turns those episodes into
``eval/success_rate`` with its 95 % Wilson interval, ``eval/return/<role>`` with a normal
95 % half-width, and ``eval/n_problems``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

#: Two-sided 95 % standard-normal quantile.
Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (Wilson 1927). Unlike the normal
    interval it stays inside [0, 1] and does not collapse to a point at 0 or n successes,
    which matters here: early in training the policy's success rate is often 0."""
    if n <= 0:
        raise ValueError(f"need at least one trial, got {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, {n}], got {successes}")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_half_width(values: Sequence[float], z: float = Z95) -> float:
    """Half-width of the normal 95 % interval of the mean of ``values`` (sample std / sqrt(n));
    0 for fewer than two values (no spread to estimate)."""
    if len(values) < 2:
        return 0.0
    return z * statistics.stdev(values) / math.sqrt(len(values))


def evaluation_metrics(
    successes: Sequence[bool], returns: Sequence[dict[str, float]], roles: Sequence[str]
) -> dict[str, float]:
    """``eval/*`` metrics of one evaluation: one success flag and one ``{role: return}`` per
    episode (a role that never acted has return 0)."""
    n = len(successes)
    if n == 0 or len(returns) != n:
        raise ValueError(f"need one return mapping per episode, got {len(returns)} for {n} episodes")
    low, high = wilson_interval(sum(bool(s) for s in successes), n)
    metrics = {"eval/n_problems": float(n), "eval/success_rate": sum(bool(s) for s in successes) / n,
               "eval/success_ci_low": low, "eval/success_ci_high": high}
    for role in roles:
        values = [float(r.get(role, 0.0)) for r in returns]
        metrics[f"eval/return/{role}"] = statistics.fmean(values)
        metrics[f"eval/return_ci95/{role}"] = mean_half_width(values)
    return metrics
