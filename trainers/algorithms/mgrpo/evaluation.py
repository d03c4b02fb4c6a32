"""M-GRPO's held-out evaluation: the run harness's schedule, AT-GRPO's ``eval/*`` metrics.

After step ``s``, when :func:`trainers.harness.run_dir.evaluation_due` says so (every
``eval_every`` steps and after the last; ``eval_every`` 0: never), the current policies play
one rollout of each held-out question ``0 .. eval_problems - 1`` of ``eval_split``
(:func:`evaluate`), sampled at the training temperature. Each side samples in an RNG stream
of its own, seeded by the run's seed, the side and the step (:func:`evaluation_stream`), so
evaluating changes nothing else: a run that evaluates trains, resumes and reruns exactly like
one that does not. The step's ``metrics.jsonl`` line gets the names AT-GRPO's evaluation logs
(:func:`trainers.maths.evaluation.evaluation_metrics`): ``eval/success_rate`` (the env's
``correct``) with its 95 % Wilson interval, ``eval/return/<role>`` (the sum of the role's
action rewards in an episode) and ``eval/n_problems``.

In a two-process run the sub side serves the evaluation's delegations as it serves the
training rollout's (:mod:`trainers.algorithms.mgrpo.remote`), under :func:`eval_prefix`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import torch

import pettingllm_envs
from pettingllm_envs.capabilities import Delegation
from trainers.algorithms.mgrpo.config import MGRPOConfig
from trainers.algorithms.mgrpo.rollout import HierarchicalRollout, RoleSampler, hierarchical_rollout
from trainers.harness.run_dir import evaluation_due
from trainers.maths.evaluation import evaluation_metrics
from trainers.maths.seeding import derive_seed, isolated_rng


def due(cfg: MGRPOConfig, step: int) -> bool:
    """Whether the run evaluates after step ``step`` (1-based)."""
    return evaluation_due(step, every=cfg.evaluation.eval_every, last=cfg.run.steps)


def eval_prefix(step: int) -> str:
    """The store prefix of the evaluation after step ``step`` (the step's own is ``str(step - 1)``)."""
    return f"eval/{step}"


@contextmanager
def evaluation_stream(cfg: MGRPOConfig, side: str, step: int) -> Iterator[None]:
    """Sample without gradients in the side's own RNG stream for the evaluation after ``step``."""
    with isolated_rng(derive_seed(cfg.run.seed, "eval", side, step)), torch.no_grad():
        yield


def episode_metrics(rollout: HierarchicalRollout, roles: Sequence[str]) -> dict[str, float]:
    """``eval/*`` metrics of one rollout per question (pure)."""
    keys = sorted(rollout.outcomes)
    returns: dict[tuple[int, int], dict[str, float]] = {key: defaultdict(float) for key in keys}
    for turn in rollout.turns:
        returns[turn.question, turn.rollout][turn.agent] += turn.reward
    return evaluation_metrics([rollout.outcomes[key].correct for key in keys], [returns[key] for key in keys], roles)


def evaluate(cfg: MGRPOConfig, samplers: Mapping[str, RoleSampler], delegation: Delegation, *, side: str,
             step: int) -> dict[str, float]:
    """The held-out evaluation after step ``step`` (module docstring) with the side's samplers."""
    with evaluation_stream(cfg, side, step):
        rollout = hierarchical_rollout(lambda: pettingllm_envs.make(cfg.task.env, **cfg.task.env_kwargs),
                                       list(range(cfg.evaluation.eval_problems)), 1, samplers, delegation=delegation,
                                       split=cfg.evaluation.eval_split)
    return episode_metrics(rollout, [delegation.manager, delegation.worker])


__all__ = ["due", "episode_metrics", "eval_prefix", "evaluate", "evaluation_stream"]
