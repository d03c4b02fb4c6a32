"""One PPO-clip update of one policy: the update both trainers run (AT-GRPO's ``Trainer``, M-GRPO).

:func:`ppo_update` takes the policy set (or a data-parallel wrapper with its surface), the name
of the policy to update, its samples (anything with ``completion``, ``advantage`` and ``degenerate``: AT-GRPO's
:class:`~trainers.rollout.episodes.Sample`, M-GRPO's :class:`~trainers.algorithms.mgrpo.alignment.PolicySample`)
and :class:`~trainers.learning.settings.UpdateSettings`, and returns :class:`UpdateStats` (sums, so that
policies and ranks add up; :mod:`trainers.learning.metrics` turns them into the metric names both trainers log).

What it does, in order (docs/design.md §4 "Loss"):

1. **Which samples.** With ``drop_degenerate`` the samples of degenerate groups (all rewards
   equal: advantage exactly 0) are left out unless a KL term applies to them
   (:func:`trainable`); every other sample stays, a zero-advantage one included, so the
   aggregation's normalisers count the same tokens whichever trainer calls.
2. **Per epoch**, micro-batches of ``micro_batch_size`` sequences are scored and their
   losses back-propagated; each micro-batch's loss is already divided by the *whole* batch's
   normalisers (tokens, sequences), so the accumulated gradient is the full-batch gradient
   and the micro-batch size bounds memory only. Then the gradient norm is clipped to
   ``max_grad_norm`` and the optimiser takes **one** step.
3. **Old log-probs, one rule.** In epoch 0 the scored policy is the one that sampled, so the
   ratio is exactly 1: the old log-probs are the epoch-0 scores themselves (detached), not the
   ones recorded at generation, which equal them only up to float rounding (KV cache vs. full
   forward, another engine's kernels). Later epochs' ratios are taken against them.
4. **Importance sampling** (``importance_sampling: truncated``): when another engine sampled the tokens, each
   token's policy-gradient term is weighed by ``min(exp(logp_old - logp_engine), tis_cap)``
   (:mod:`trainers.maths.importance_sampling`), fixed in epoch 0 for all epochs.

**Data-parallel wrappers** (torch.distributed; each rank runs the update on its own shard of the
samples) pass :class:`UpdateHooks`, so the maths above is the one single-process update:

* ``reduce_totals(tokens, sequences) -> (tokens, sequences)`` must return the sums over all
  ranks (all-reduce SUM), so that every rank divides by the global normalisers;
* ``agree_micro_batches(count) -> count`` must return the largest micro-batch count of any rank
  (all-reduce MAX). A sharded (FSDP2) or DDP-wrapped model's forward and backward are
  collectives, so every rank runs as many micro-batches; a rank past its own samples runs
  :func:`stand_in_micro_batch` (zero loss) instead, so shards of any size, an empty one
  included, pair up and collectives never hang;
* ``reduce_gradients(parameters)``, for a wrapper whose model does not reduce its own gradients
  (plain replicas), is called once per epoch after the last micro-batch's backward and before
  clipping; it must all-reduce (SUM) every parameter's ``.grad``. FSDP2 and DDP reduce in their
  backward instead and leave it None
  (:class:`~trainers.distributed.data_parallel.DataParallelPolicy`: sums, not means, and DDP
  synced once per epoch).

Summed over ranks, the shards' gradients are then exactly the full batch's (each micro-batch's
loss is already divided by the global normalisers), every rank clips the same global norm and
takes the same optimiser step, so the weights stay identical; the update returns early only when
the *reduced* totals say no rank has a sample. :class:`UpdateStats` stays per rank (its sums add
across ranks) except ``grad_norm``, which is the global norm.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from trainers.learning.settings import UpdateSettings
from trainers.maths.importance_sampling import padded_engine_logprobs, truncated_is_weights
from trainers.maths.loss import ppo_clip_loss
from trainers.models.policy_set import PolicySet
from trainers.profiling.phases import phase


class ScoredCompletion(Protocol):
    """A sampled completion as the update reads it (:class:`trainers.generation.protocol.Generation`)."""

    prompt_ids: Sequence[int]
    completion_ids: Sequence[int]
    logprobs: Sequence[float]
    """The generating engine's log-prob of each completion token (read under truncated importance sampling only)."""


class UpdateSample(Protocol):
    """A training sample: its completion, its group-relative advantage and whether its group
    was degenerate."""

    @property
    def completion(self) -> Any: ...  # a ScoredCompletion (AT-GRPO's Sample types it as Any)
    @property
    def advantage(self) -> float: ...
    @property
    def degenerate(self) -> bool: ...


@dataclass
class UpdateStats:
    """What one update did. Sums over tokens and samples (micro-batches, policies and
    data-parallel ranks add up); ``loss`` is the mean over epochs of the batch loss."""

    samples: int = 0
    """Samples the update trained on (after :func:`trainable`)."""
    tokens: float = 0.0
    """Completion tokens scored, summed over epochs."""
    clipped_tokens: float = 0.0
    kl_sum: float = 0.0
    loss: float = 0.0
    grad_norm: float = 0.0
    """The last epoch's gradient norm before clipping."""
    is_weight_sum: float = 0.0
    is_truncated_tokens: float = 0.0
    is_tokens: float = 0.0


def _identity_totals(tokens: float, sequences: float) -> tuple[float, float]:
    return tokens, sequences


def _own_count(micro_batches: int) -> int:
    return micro_batches


@dataclass(frozen=True)
class UpdateHooks:
    """What a data-parallel wrapper plugs in (module docstring); the defaults are one process."""

    reduce_totals: Callable[[float, float], tuple[float, float]] = _identity_totals
    reduce_gradients: Callable[[Sequence[torch.nn.Parameter]], None] | None = None
    agree_micro_batches: Callable[[int], int] = _own_count
    """This rank's micro-batch count -> the largest of any rank's (all-reduce MAX). A sharded or
    DDP-wrapped model's forward and backward are collectives, so every rank must run as many; a
    rank past its own samples runs :func:`stand_in_micro_batch` instead."""


def stand_in_micro_batch(policies: PolicySet, name: str, *, use_kl: bool) -> None:
    """The forwards and the backward of a micro-batch (the collectives of a sharded model) with
    nothing learned: one one-token sequence, its loss multiplied by zero."""
    pad = [[policies.pad_id]]
    if use_kl:
        with torch.no_grad(), policies.reference_model(name) as reference:
            policies.token_logprobs(reference, pad, pad)
    with policies.active(name) as model:
        logp, _ = policies.token_logprobs(model, pad, pad)
    (logp.sum() * 0.0).backward()


def trainable(samples: Sequence[UpdateSample], settings: UpdateSettings) -> list[UpdateSample]:
    """The samples that enter the update: all of them, except degenerate groups' samples with
    ``drop_degenerate`` and no KL term (they would add nothing but cost)."""
    if settings.drop_degenerate and settings.kl_coef == 0:
        return [s for s in samples if not s.degenerate]
    return list(samples)


def ppo_update(policies: PolicySet, name: str, samples: Sequence[UpdateSample], settings: UpdateSettings, *,
               hooks: UpdateHooks = UpdateHooks()) -> UpdateStats:
    """Update policy ``name`` of ``policies`` on ``samples`` (all of them its own: the caller
    picks the samples of the roles it plays); see the module docstring. ``settings`` must be
    :func:`~trainers.learning.settings.resolved` (``importance_sampling`` not ``auto``)."""
    if settings.importance_sampling == "auto":
        raise ValueError("importance_sampling='auto' must be resolved for the sampler first (settings.resolved)")
    batch = trainable(samples, settings)
    out = UpdateStats(samples=len(batch))
    local_tokens = float(sum(len(s.completion.completion_ids) for s in batch))
    total_tokens, total_sequences = hooks.reduce_totals(local_tokens, float(len(batch)))
    if total_sequences == 0:
        return out
    use_kl = settings.kl_coef > 0
    params = policies.parameters(name)
    optimizer = policies.optimizers[name]
    micro_batches = hooks.agree_micro_batches(-(-len(batch) // settings.micro_batch_size))
    old_logp: dict[int, torch.Tensor] = {}
    is_weights: dict[int, torch.Tensor | None] = {}
    for epoch in range(settings.ppo_epochs):
        optimizer.zero_grad(set_to_none=True)
        for start in range(0, micro_batches * settings.micro_batch_size, settings.micro_batch_size):
            micro = batch[start:start + settings.micro_batch_size]
            if not micro:
                stand_in_micro_batch(policies, name, use_kl=use_kl)
                continue
            prompts = [s.completion.prompt_ids for s in micro]
            completions = [s.completion.completion_ids for s in micro]
            ref_logp = None
            if use_kl:
                with torch.no_grad(), policies.reference_model(name) as reference, phase("scoring"):
                    ref_logp, _ = policies.token_logprobs(reference, prompts, completions)
            with policies.active(name) as model, phase("scoring"):
                logp, mask = policies.token_logprobs(model, prompts, completions)
            if epoch == 0:
                old_logp[start] = logp.detach()  # rule 3 of the module docstring: the ratio is exactly 1
                is_weights[start] = None
                if settings.importance_sampling == "truncated":
                    engine = padded_engine_logprobs([s.completion.logprobs for s in micro], logp.shape[1], logp.device)
                    is_weights[start], is_stats = truncated_is_weights(old_logp[start], engine, mask,
                                                                       cap=settings.tis_cap)
                    out.is_weight_sum += is_stats.weight_sum
                    out.is_truncated_tokens += is_stats.truncated_tokens
                    out.is_tokens += is_stats.tokens
            advantages = torch.tensor([float(s.advantage) for s in micro], device=logp.device)
            loss, stats = ppo_clip_loss(
                logp, old_logp[start], advantages, mask, eps_low=settings.eps_low, eps_high=settings.eps_high,
                aggregation=settings.aggregation, total_tokens=total_tokens, total_sequences=total_sequences,
                max_len=policies.spec.max_new_tokens, ref_logp=ref_logp, kl_coef=settings.kl_coef,
                token_weights=is_weights[start])
            with phase("backward"):
                loss.backward()
            out.loss += float(loss.detach()) / settings.ppo_epochs
            out.tokens += stats.tokens
            out.clipped_tokens += stats.clipped_tokens
            out.kl_sum += stats.kl_sum
        if hooks.reduce_gradients is not None:
            for p in params:
                if p.grad is None:  # an empty shard, or a parameter the loss did not reach
                    p.grad = torch.zeros_like(p)
            hooks.reduce_gradients(params)
        with phase("optimizer"):
            out.grad_norm = float(torch.nn.utils.clip_grad_norm_(params, settings.max_grad_norm))
            optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return out


__all__ = ["ScoredCompletion", "UpdateHooks", "UpdateSample", "UpdateStats", "ppo_update", "stand_in_micro_batch",
           "trainable"]
