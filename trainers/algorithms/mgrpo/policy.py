"""M-GRPO's pieces that both sides use: a side's policy (:class:`RolePolicy`), the env's
delegation, the per-step seeds and questions, the step's metrics line and a side's checkpoint
(the loops that use them are :mod:`trainers.algorithms.mgrpo.sides`)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import pettingllm_envs
from pettingllm_envs.capabilities import Delegation, capability
from trainers.algorithms.mgrpo.alignment import BatchStats, PolicySample
from trainers.algorithms.mgrpo.config import MGRPOConfig
from trainers.algorithms.mgrpo.rollout import HierarchicalRollout, Key, Outcome
from trainers.generation.protocol import Generation
from trainers.generation.transformers_backend import TransformersGenerator
from trainers.harness.errors import ConfigError
from trainers.harness.run_dir import Checkpoints, restore_training_state, save_training_state
from trainers.learning.metrics import action_reward_metrics, group_metrics, update_metrics
from trainers.learning.update import UpdateStats, ppo_update
from trainers.maths.seeding import derive_seed, seed_everything
from trainers.models.policy_set import PolicySet
from trainers.profiling.phases import phase
from trainers.rollout.episodes import Messages


@dataclass
class Action:
    """A sampled action: the text the env receives (prefill + completion) and the generation."""

    generation: Generation
    text: str


class RolePolicy:
    """One policy of this process: batched sampling (with the role's prefill) and PPO updates."""

    def __init__(self, cfg: MGRPOConfig, roles: Sequence[str], name: str, model: str, *,
                 checkpoint: Path | None = None) -> None:
        """``checkpoint``: the checkpoint a resumed run starts from (its ``policies/<name>``)."""
        self.cfg, self.name = cfg, name
        self.policies = PolicySet(dataclasses.replace(cfg.model, model=model), dict.fromkeys(roles, name),
                                  init_dir=checkpoint / "policies" if checkpoint else None,
                                  reference=cfg.update.kl_coef > 0)
        self.generator = TransformersGenerator(self.policies)  # it samples the policies' own, restored, weights
        tokenizer = self.policies.tokenizer
        self.prefill_ids = {role: list(tokenizer(text, add_special_tokens=False)["input_ids"])
                            for role, text in cfg.mgrpo.prefill.items()}

    def sample(self, agent: str, prompts: Sequence[Messages], keys: Sequence[Key] = ()) -> list[Action]:
        """One action per prompt, one batched generation."""
        prefill = self.prefill_ids.get(agent, [])
        ids = [self.policies.encode_prompt(messages)[1] + prefill for messages in prompts]
        generations = self.generator.generate(self.name, ids, 1)
        return [Action(g, self.cfg.mgrpo.prefill.get(agent, "") + g.text) for g in generations]

    def update(self, batch: Sequence[PolicySample]) -> UpdateStats:
        """The trainers' PPO update (:func:`trainers.learning.update.ppo_update`) on a level's batch."""
        samples = [dataclasses.replace(s, completion=s.completion.generation) for s in batch]
        with phase("update"):
            stats = ppo_update(self.policies, self.name, samples, self.cfg.update_settings())
        if stats.samples:
            with self.policies.active(self.name) as model, phase("weight_sync"):
                self.generator.sync(self.name, model)  # the next rollout samples the updated policy
        return stats


# --------------------------------------------------------------------- helpers
def env_delegation(cfg: MGRPOConfig) -> Delegation:
    """The env's :class:`~pettingllm_envs.capabilities.Delegation`, checked against its roles and
    ``prefill``: a run on an env without it fails here, at its start, with one message naming
    what is missing (:class:`~pettingllm_envs.capabilities.MissingCapability` or
    :class:`~trainers.harness.errors.ConfigError`), never with a ``KeyError`` after a whole rollout."""
    declared = capability(cfg.task.env, Delegation)
    env = pettingllm_envs.make(cfg.task.env, **cfg.task.env_kwargs)
    roles = list(env.possible_agents)
    env.close()
    if declared.manager == declared.worker or sorted(roles) != sorted((declared.manager, declared.worker)):
        raise ConfigError(f"{cfg.task.env} declares delegation from {declared.manager!r} to {declared.worker!r}, "
                          f"but its roles are {roles}: M-GRPO needs exactly those two roles")
    unknown = sorted(set(cfg.mgrpo.prefill) - set(roles))
    if unknown:
        raise ConfigError(f"config field 'prefill': roles {unknown} are not roles of {cfg.task.env} "
                          f"({', '.join(roles)})")
    return declared


def seed_side(cfg: MGRPOConfig, side: str) -> None:
    """Seed every global RNG for one side (``local``, ``main`` or ``sub``): each side its own stream."""
    seed_everything(derive_seed(cfg.run.seed, "mgrpo", side))


def step_questions(cfg: MGRPOConfig, step: int) -> list[int]:
    """The train questions of step ``step`` (0-based)."""
    return [step * cfg.mgrpo.questions_per_step + j for j in range(cfg.mgrpo.questions_per_step)]


def alignment_seed(cfg: MGRPOConfig, step: int) -> int:
    """The seed of step ``step``'s (0-based) sub-sample alignment."""
    return derive_seed(cfg.run.seed, "alignment", step)


def env_maker(cfg: MGRPOConfig) -> Any:
    """A function that makes the run's env."""
    return lambda: pettingllm_envs.make(cfg.task.env, **cfg.task.env_kwargs)


def sub_completions(rollout: HierarchicalRollout) -> dict[Key, list[Action]]:
    """The sub-agent's actions of each rollout, in order."""
    out: dict[Key, list[Action]] = defaultdict(list)
    for t in rollout.turns:
        if t.delegation is not None:
            out[t.question, t.rollout].append(t.completion)
    return out


def token_count(actions: Sequence[Any]) -> int:
    """Completion tokens of the actions sampled in this process (remote ones carry text only)."""
    return sum(len(a.generation.completion_ids) for a in actions if isinstance(a, Action))


def outcome_metrics(outcomes: dict[Key, Outcome]) -> dict[str, float]:
    """Mean main reward, mean delegation (sub) reward, success rate and delegations per rollout (pure)."""
    values = list(outcomes.values())
    delegations = [r for o in values for r in o.delegation_rewards]
    return {
        "reward/main": float(np.mean([o.main_reward for o in values])) if values else 0.0,
        "reward/sub": float(np.mean(delegations)) if delegations else 0.0,
        "rollout/success_rate": float(np.mean([o.correct for o in values])) if values else 0.0,
        "delegations/mean": len(delegations) / len(values) if values else 0.0,
    }


def step_metrics(step: int, rollout: HierarchicalRollout, levels: Mapping[str, BatchStats],
                 updates: Mapping[str, UpdateStats], *, tokens: int, seconds: Mapping[str, float]) -> dict[str, float]:
    """One ``metrics.jsonl`` line (module docstring): ``levels`` is each level's batch
    statistics, ``updates`` each updated policy's (a frozen sub-agent has none), ``seconds``
    the step's ``time/<name>`` figures (pure)."""
    metrics: dict[str, float] = {"step": step, **outcome_metrics(rollout.outcomes),
                                 **action_reward_metrics((t.agent, t.reward) for t in rollout.turns)}
    metrics.update(group_metrics(sum(s.groups for s in levels.values()), sum(s.degenerate for s in levels.values())))
    for level, s in levels.items():
        metrics.update(group_metrics(s.groups, s.degenerate, level=level))
        metrics[f"samples/{level}"] = s.samples
        if s.slots:
            metrics.update({"alignment/slots": s.slots, "alignment/padded": s.padded, "alignment/empty": s.empty,
                            "alignment/dropped": s.dropped})
    metrics["samples"] = sum(s.samples for s in levels.values())
    metrics["tokens"] = tokens
    metrics.update(update_metrics(updates))
    metrics.update({f"time/{name}": value for name, value in seconds.items()})
    return metrics


def restore_side(checkpoint: Path | None, trained: Sequence[RolePolicy]) -> None:
    """Optimisers and RNG states of a resumed side (its weights were loaded with its policies)."""
    if checkpoint is not None:
        restore_training_state(checkpoint, [p.policies for p in trained])


def save_side(checkpoints: Checkpoints, step: int, trained: Sequence[RolePolicy]) -> None:
    """The checkpoint of step ``step``: the side's policies, optimisers, RNG states and step."""
    checkpoints.save(step, lambda folder: save_training_state(folder, [p.policies for p in trained], {"step": step}))


__all__ = ["Action", "RolePolicy", "alignment_seed", "env_delegation", "env_maker", "outcome_metrics",
           "restore_side", "save_side", "seed_side", "step_metrics", "step_questions", "sub_completions",
           "token_count"]
