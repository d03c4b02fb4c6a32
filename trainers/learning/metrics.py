"""The metric names both trainers write to ``metrics.jsonl`` for the quantities they share.

AT-GRPO's ``Trainer`` and M-GRPO log the same quantity under the same name, so one plot
(``pettingllm plot``) and one reader serve both. ``<policy>`` is a policy name (AT-GRPO:
``shared`` or a role; M-GRPO: ``main``, ``sub`` or ``shared``), ``<level>`` an advantage
level (M-GRPO: ``main``, ``sub``, or ``shared`` with ``mode=single``).

=============================  ==============================================================
name                           quantity
=============================  ==============================================================
``loss``                       sum over the policies of their batch loss (mean over epochs)
``loss/<policy>``              that policy's batch loss
``kl``                         mean k3 KL to the reference per trained token (0 without KL)
``clip_frac``                  share of trained tokens whose ratio was clipped
``samples/trained``            samples that entered the updates (after dropping degenerate ones)
``samples/trained/<policy>``   the same for one policy
``grad_norm/<policy>``         the policy's gradient norm before clipping (last epoch)
``tis/weight_mean``            mean truncated-IS weight per token (only with truncated IS)
``tis/clip_frac``              share of tokens whose IS weight hit the cap (the same)
``groups/count``               advantage groups of the step
``groups/degenerate_frac``     share of them whose rewards were all equal (zero advantages)
``groups/count/<level>``       M-GRPO: groups of one level
``groups/degenerate_frac/<level>``  M-GRPO: degenerate share of one level
``reward/mean``                mean reward of the rollout's actions (each action's own reward)
``reward/agent/<role>``        the same for one role's actions
``samples``                    training samples the rollout produced
``tokens``                     completion tokens the rollout produced
``rollout/success_rate``       success rate of independently sampled episodes (the policy's)
``time/generate``, ``time/env``, ``time/update``, ``time/step``  seconds of the step
=============================  ==============================================================

Trainer-specific names (``reward/turn/<t>``, ``tree/success_rate``, ``eval/...``) and
M-GRPO-specific ones (``reward/main``, ``reward/sub``, ``delegations/mean``, ``alignment/...``)
are documented where they are computed. Pure functions.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping

from trainers.learning.update import UpdateStats


def update_metrics(stats: Mapping[str, UpdateStats]) -> dict[str, float]:
    """The update's names (module docstring) for one step's ``policy -> UpdateStats``."""
    tokens = sum(s.tokens for s in stats.values())
    metrics: dict[str, float] = {
        "loss": sum(s.loss for s in stats.values()),
        "kl": sum(s.kl_sum for s in stats.values()) / tokens if tokens else 0.0,
        "clip_frac": sum(s.clipped_tokens for s in stats.values()) / tokens if tokens else 0.0,
        "samples/trained": sum(s.samples for s in stats.values()),
    }
    weighted = sum(s.is_tokens for s in stats.values())
    if weighted:
        metrics["tis/weight_mean"] = sum(s.is_weight_sum for s in stats.values()) / weighted
        metrics["tis/clip_frac"] = sum(s.is_truncated_tokens for s in stats.values()) / weighted
    for name, s in stats.items():
        metrics[f"loss/{name}"] = s.loss
        metrics[f"samples/trained/{name}"] = s.samples
        metrics[f"grad_norm/{name}"] = s.grad_norm
    return metrics


def action_reward_metrics(rewards: Iterable[tuple[str, float]]) -> dict[str, float]:
    """``reward/mean`` and ``reward/agent/<role>`` of the actions' ``(role, reward)`` pairs."""
    by_agent: dict[str, list[float]] = defaultdict(list)
    for agent, reward in rewards:
        by_agent[agent].append(reward)
    every = [r for values in by_agent.values() for r in values]
    metrics = {"reward/mean": statistics.fmean(every) if every else 0.0}
    metrics.update({f"reward/agent/{a}": statistics.fmean(v) for a, v in sorted(by_agent.items())})
    return metrics


def group_metrics(groups: int, degenerate: int, *, level: str | None = None) -> dict[str, float]:
    """``groups/count`` and ``groups/degenerate_frac``, or one level's (``/<level>``)."""
    suffix = f"/{level}" if level is not None else ""
    return {f"groups/count{suffix}": groups,
            f"groups/degenerate_frac{suffix}": degenerate / groups if groups else 0.0}
