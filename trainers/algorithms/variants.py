"""Prompt-conditioned shared-weight agents (docs/design.md §5) and logit-averaging decoding.

**Training mode.** K instruction variants ("set up an equation", "estimate and check", ...)
condition the G rollouts of each question on *one* shared model: rollout i is sampled from
the question's prompt with variant ``i mod K`` added to the system message. The GRPO group
is still the question (all G completions, every variant): per-variant normalisation would
make each variant beat only its own average and throw away the comparison between strategies
(docs/design.md §5). The point of the variants is to decorrelate the group: under independence
Pr[degenerate] = p^G + (1-p)^G, and temperature-only rollouts, which share one strategy,
succeed or fail together more often than that. The mode acts on the first role's first
turn of any env (for ``math_v0``: the reasoner's first answer), one env step per rollout.
``prompt_variants=[]`` is the temperature-only baseline with the same G.

**Ensemble decoding.** :func:`ensemble_generate` averages the next-token log-probabilities
of the K variant-conditioned prompts at every step (a product of experts, renormalised) and
feeds the chosen token to all K contexts: one answer that all strategies vote on token by
token. With K identical prompts it is exactly single-prompt sampling.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from pettingzoo import AECEnv

from pettingllm_envs.commandline.checks import check_env_config, check_model
from trainers.algorithms.atgrpo.options import build_parser as config_parser
from trainers.algorithms.atgrpo.options import load_run_config
from trainers.algorithms.atgrpo.train import METRICS, Trainer, interruption_note
from trainers.generation import Generation, Generator
from trainers.models.policy_set import PolicySet
from trainers.models.prompt_cache import KV_CACHE_FIELD, left_pad, positions_from_mask
from trainers.rollout.episodes import (
    Messages,
    RolloutResult,
    Sample,
    Sampler,
    acting_reward,
    agent_prompt,
    bystander_credit,
    episode_success,
)


@dataclass
class VariantGeneration(Generation):
    """A completion and the index of the instruction variant that conditioned it (-1: none)."""

    variant: int = -1


def condition(messages: Messages, variant: str) -> Messages:
    """``messages`` with the instruction ``variant`` appended to the system message (one is
    added when there is none). The env's own instructions stay intact: the variant only
    says *how* to approach the task."""
    line = f"Approach: {variant}."
    out = [dict(m) for m in messages]
    if out and out[0]["role"] == "system":
        out[0]["content"] = f"{out[0]['content']}\n{line}"
        return out
    return [{"role": "system", "content": line}, *out]


def round_robin(n: int, k: int) -> list[int]:
    """Variant index of each of ``n`` rollouts: 0, 1, ..., k-1, 0, 1, ... (each variant gets
    n // k or n // k + 1 rollouts)."""
    if k < 1:
        raise ValueError(f"need at least one variant, got {k}")
    return [i % k for i in range(n)]


class VariantSampler:
    """A rollout sampler (:data:`trainers.rollout.episodes.Sampler`) that conditions the n completions
    of every prompt on the variants round-robin, all prompts x n in one batched call. With no
    variants it samples n completions of the unconditioned prompt (the temperature baseline)."""

    def __init__(self, policies: PolicySet, generator: Generator, variants: Sequence[str]) -> None:
        self.policies = policies
        self.generator = generator
        self.variants = list(variants)

    def __call__(self, agent: str, prompts: Sequence[Messages], n: int) -> list[list[VariantGeneration]]:
        name = self.policies.role_to_policy[agent]
        if not self.variants:
            ids = [self.policies.encode_prompt(m)[1] for m in prompts]
            flat = self.generator.generate(name, ids, n)
            tags = [-1] * len(flat)
        else:
            tags = round_robin(n, len(self.variants)) * len(prompts)
            ids = [self.policies.encode_prompt(condition(m, self.variants[k]))[1]
                   for m in prompts for k in round_robin(n, len(self.variants))]
            flat = self.generator.generate(name, ids, 1)
        tagged = [VariantGeneration(g.prompt_ids, g.completion_ids, g.logprobs, g.text, variant=k)
                  for g, k in zip(flat, tags, strict=True)]
        return [tagged[i * n:(i + 1) * n] for i in range(len(prompts))]


def first_turn_rollout(
    env_fn: Callable[[], AECEnv], problems: Sequence[int], n: int, sampler: Sampler, *, split: str = "train"
) -> RolloutResult:
    """n completions of the first role's first-turn prompt per problem, each applied to its own
    deep copy of the reset env: a one-step (single-role) GRPO rollout. All n samples of a
    problem share the group key (problem, first role, turn 0) whatever their variant; an
    episode's success is the env's ``success`` right after that one action."""
    result = RolloutResult()
    start = time.perf_counter()
    states = []
    for p in problems:
        env = env_fn()
        env.reset(seed=p, options={"split": split})
        states.append(env)
    agents = {env.agent_selection for env in states}
    if len(agents) != 1:
        raise ValueError(f"problems start with different roles {sorted(agents)}; one batch needs one role")
    agent = agents.pop()
    prompts = [agent_prompt(env, agent) for env in states]
    result.seconds_env += time.perf_counter() - start
    start = time.perf_counter()
    completions = sampler(agent, prompts, n)
    result.seconds_generate += time.perf_counter() - start
    start = time.perf_counter()
    for p, env, messages, group in zip(problems, states, prompts, completions, strict=True):
        if len(group) != n:
            raise ValueError(f"the sampler returned {len(group)} completions, expected {n}")
        for i, completion in enumerate(group):
            branch = copy.deepcopy(env)
            branch.step(completion.text)
            reward, reward_global, reward_local = acting_reward(branch, agent)
            result.samples.append(Sample(p, i, agent, 0, messages, completion, reward, reward_global, reward_local,
                                         selected=True))
            for role, amount in bystander_credit(branch, agent).items():  # the others have not acted yet
                result.credit_later(None, role, amount)
            result.successes.append(episode_success(branch))
    result.seconds_env += time.perf_counter() - start
    return result


def variant_metrics(samples: Sequence[Sample], variants: Sequence[str]) -> dict[str, float]:
    """``reward/variant/<k>``: mean reward of the samples conditioned on variant k (pure).
    Logged beside the question-level group statistics: one variant dominating means the
    strategy matters; variants drifting together means the diversity collapsed."""
    by_variant: dict[int, list[float]] = defaultdict(list)
    for s in samples:
        k = getattr(s.completion, "variant", -1)
        if k >= 0:
            by_variant[k].append(s.reward)
    return {f"reward/variant/{k}": statistics.fmean(by_variant[k]) for k in range(len(variants)) if by_variant[k]}


class PromptConditionedTrainer(Trainer):
    """The AT-GRPO trainer on first-turn rollouts conditioned by ``config.rollout.prompt_variants``
    (see the module docstring); everything else (advantages grouped by question, the PPO
    update, logging, checkpoints, resume) is the base trainer's."""

    plays_seats: ClassVar[bool] = False  # first-turn rollouts: no partner ever acts

    def rollout(self, step: int) -> RolloutResult:
        cfg = self.config
        problems = [step * cfg.rollout.problems_per_step + j for j in range(cfg.rollout.problems_per_step)]
        sampler = VariantSampler(self.policies, self.generator, cfg.rollout.prompt_variants)
        return first_turn_rollout(self.make_env, problems, cfg.rollout.n_samples, sampler, split=cfg.task.split)

    def log(self, metrics: dict[str, float], samples: Sequence[Sample]) -> None:
        """Add the per-variant rewards to the step's metrics (the same dict ``train_step``
        returns), then log as the base trainer does."""
        metrics.update(variant_metrics(samples, self.config.rollout.prompt_variants))
        super().log(metrics, samples)


@torch.no_grad()
def ensemble_generate(
    policies: PolicySet, name: str, prompt_sets: Sequence[Sequence[Sequence[int]]], n: int = 1, *,
    greedy: bool = False,
) -> list[Generation]:
    """Decode ``n`` completions per prompt set with the next-token log-probs averaged over the
    set's K prompts (every set has the same K), one batched KV-cached loop.

    At each step every one of the K contexts of a chain scores the next token (temperature
    applied), the K log-prob vectors are averaged and renormalised, and one token is sampled
    (or taken greedily) and appended to all K contexts. Returned in set-major order; each
    :class:`Generation` carries the set's first prompt and the ensemble's log-probs of its
    tokens. K = 1 is plain single-prompt decoding.
    """
    ks = {len(s) for s in prompt_sets}
    if len(ks) != 1 or 0 in ks:
        raise ValueError(f"every prompt set needs the same, positive number of prompts, got {sorted(ks)}")
    k = ks.pop()
    cfg = policies.spec
    rows = [list(p) for s in prompt_sets for _ in range(n) for p in s]
    ids, mask = left_pad(rows, policies.pad_id)
    input_ids = torch.tensor(ids, device=policies.device)
    attention = torch.tensor(mask, device=policies.device)
    positions = positions_from_mask(attention)
    eos = torch.tensor(policies.eos_ids, device=policies.device)
    chains = len(rows) // k
    finished = torch.zeros(chains, dtype=torch.bool, device=policies.device)
    tokens: list[torch.Tensor] = []
    logps: list[torch.Tensor] = []
    with policies.active(name) as model, policies.autocast():  # the run's compute dtype, as the in-process sampler
        out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True,
                    logits_to_keep=1)
        next_position = positions[:, -1:] + 1
        for _ in range(cfg.max_new_tokens):
            per_prompt = F.log_softmax(out.logits[:, -1].float() / cfg.temperature, dim=-1)
            logp_all = F.log_softmax(per_prompt.view(chains, k, -1).mean(dim=1), dim=-1)
            token = logp_all.argmax(dim=-1) if greedy else torch.multinomial(logp_all.exp(), 1).squeeze(1)
            token = torch.where(finished, torch.full_like(token, policies.pad_id), token)
            tokens.append(token)
            logps.append(logp_all.gather(1, token[:, None]).squeeze(1))
            finished = finished | torch.isin(token, eos)
            if bool(finished.all()) or len(tokens) == cfg.max_new_tokens:
                break
            attention = torch.cat([attention, torch.ones_like(attention[:, :1])], dim=1)
            out = model(input_ids=token.repeat_interleave(k)[:, None], attention_mask=attention,
                        position_ids=next_position, use_cache=True, **{KV_CACHE_FIELD: getattr(out, KV_CACHE_FIELD)})
            next_position = next_position + 1
    token_rows = torch.stack(tokens, dim=1).tolist()
    logp_rows = torch.stack(logps, dim=1).tolist()
    generations = []
    for chain, (token_row, logp_row) in enumerate(zip(token_rows, logp_rows, strict=True)):
        length = next((t + 1 for t, tok in enumerate(token_row) if tok in policies.eos_ids), len(token_row))
        completion = token_row[:length]
        text = policies.tokenizer.decode(completion, skip_special_tokens=True)
        generations.append(Generation(rows[chain * k], completion, logp_row[:length], text))
    return generations


DESCRIPTION = ("Train the first role's first answer with K prompt variants per question on one shared model "
               "(docs/design.md §5); --prompt-variants '[]' is the temperature-only baseline. Options are train's.")


def build_parser(prog: str = "pettingllm train-variants") -> argparse.ArgumentParser:
    """``pettingllm train-variants``'s parser: the trainer's options under this command's name."""
    return config_parser(prog, DESCRIPTION)


def main(argv: Sequence[str] | None = None) -> int:
    """``pettingllm train-variants [--field VALUE ...]``: the prompt-conditioned trainer
    (``--prompt-variants '[]'`` for the temperature-only baseline)."""
    config = load_run_config(argv, prog="pettingllm train-variants", description=DESCRIPTION)
    check_env_config(config.task.env, config.task.env_kwargs)
    check_model(config.model.model)
    trainer = PromptConditionedTrainer(config)
    print(f"[train-variants] env={config.task.env} variants={config.rollout.prompt_variants} "
          f"G={config.rollout.n_samples} "
          f"run_dir={trainer.run_dir}", file=sys.stderr)
    try:
        history = trainer.train()
    except KeyboardInterrupt:
        print(f"[train-variants] {interruption_note(trainer, 'train-variants')}", file=sys.stderr)
        raise
    if history:
        last = history[-1]
        print(f"[train-variants] step {last['step']}: reward/mean={last['reward/mean']:.4f} "
              f"groups/degenerate_frac={last['groups/degenerate_frac']:.3f} metrics in {trainer.run_dir / METRICS}",
              file=sys.stderr)
    return 0
