"""How often a league samples each opponent (pure): uniform, the latest snapshot, or prioritised
fictitious self-play (PFSP), where an opponent is drawn in proportion to how often it still beats
the learner.

PFSP's weight is ``loss_rate ** power``: an opponent the learner always beats is drawn almost
never, one it always loses to most often (AlphaStar's "hard" weighting; a larger ``power``
concentrates on the hardest). An opponent with no recent games counts as ``UNPLAYED_LOSS_RATE``,
and every weight has the floor ``min_weight``, so no member of the pool starves and a member the
learner has stopped losing to is still revisited now and then: forgetting how to beat it shows up.
"""

from __future__ import annotations

from collections.abc import Sequence

RULES = ("uniform", "latest", "prioritised")
UNPLAYED_LOSS_RATE = 0.5
"""The loss rate assumed against an opponent the learner has not played recently: an even match."""


def loss_rate(losses: int, draws: int, games: int) -> float:
    """The learner's loss rate over ``games``, a draw counting half a loss (the zero-sum score)."""
    if games <= 0:
        return UNPLAYED_LOSS_RATE
    return (losses + 0.5 * draws) / games


def opponent_weights(rule: str, loss_rates: Sequence[float], *, latest: int | None = None, power: float = 2.0,
                     min_weight: float = 0.01) -> list[float]:
    """Sampling probabilities of the opponents (summing to 1) under ``rule``.

    ``loss_rates``: the learner's recent loss rate against each (:func:`loss_rate`); ``latest``: the index
    of the newest snapshot, the only one drawn under ``latest`` (None: no snapshot yet, so ``latest``
    falls back to uniform)."""
    if rule not in RULES:
        raise ValueError(f"opponent sampling rule {rule!r}: choose one of {RULES}")
    count = len(loss_rates)
    if count == 0:
        raise ValueError("a league needs at least one opponent to sample")
    if rule == "latest" and latest is not None:
        if not 0 <= latest < count:
            raise ValueError(f"latest={latest} is not an opponent index (0..{count - 1})")
        return [1.0 if i == latest else 0.0 for i in range(count)]
    if rule == "prioritised":
        if power <= 0 or not 0 <= min_weight < 1:
            raise ValueError(f"prioritised sampling needs power > 0 and 0 <= min_weight < 1, got {power}, {min_weight}")
        raw = [max(rate ** power, min_weight) for rate in loss_rates]
    else:
        raw = [1.0] * count
    total = sum(raw)
    return [w / total for w in raw]
