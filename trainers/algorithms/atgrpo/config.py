"""AT-GRPO's configuration: :class:`TrainConfig`, a tree of sections loadable from YAML and
overridable from the command line (:mod:`trainers.harness.config_tree`).

Sections: ``task``, ``evaluation`` and ``run`` (:mod:`trainers.harness.sections`, shared by every
trainer), ``model`` (:class:`~trainers.models.spec.ModelSpec`, what the policies are built from),
``generation`` (:class:`~trainers.generation.factory.GenerationSettings`, which backend samples),
``update`` (:class:`~trainers.learning.settings.UpdateSettings`, advantages and the PPO-clip update)
and AT-GRPO's own ``rollout`` (:class:`RolloutConfig`) and ``output`` (:class:`OutputConfig`).
Every setting says what it does and why, in its section. Defaults are sized for a CPU smoke run
with the tiny model (``pettingllm tiny-model DIR``); real runs raise ``problems_per_step``,
``n_samples`` and ``max_new_tokens`` and lower ``lr``.

References cited below:

* AT-GRPO: Zhao et al. 2025, "Stronger Together: On-Policy Reinforcement Learning for Collaborative LLMs"
  (agent- and turn-wise grouping, tree-structured best-of-N rollouts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pettingllm_envs.seats import seat_assignments
from trainers.generation.backends import backend
from trainers.generation.factory import GenerationSettings
from trainers.harness.config_tree import ConfigTree
from trainers.harness.errors import ConfigError
from trainers.harness.fields import Bound
from trainers.harness.sections import BOUNDS as SHARED_BOUNDS
from trainers.harness.sections import EvaluationConfig, RunConfig, TaskConfig
from trainers.learning.settings import UpdateSettings, resolved
from trainers.maths.advantages import GroupBy  # its one definition, with the maths
from trainers.models.spec import ModelSpec
from trainers.rollout.episodes import Selection

RolloutMode = Literal["tree", "independent"]
Regime = Literal["shared", "per_role"]

#: Instruction variants of the prompt-conditioned mode (docs/design.md §5): each names a
#: different *strategy*, so rollouts of one question disagree in approach, not only in tokens.
DEFAULT_PROMPT_VARIANTS = ("set up an equation", "estimate and check", "work backwards", "write and run code")


@dataclass(frozen=True)
class RolloutConfig:
    """How a step's samples are collected and grouped, and which roles train as which policy."""

    problems_per_step: int = 2
    """Distinct problems per step. Problem ids are ``step * problems_per_step + j`` so that a
    resumed run sees the same problems as an uninterrupted one."""
    n_samples: int = 4
    """N: completions per (problem, agent, turn) node of the tree, i.e. the GRPO group size.
    Pr[degenerate group] = p^N + (1-p)^N for a success probability p, so larger N wastes fewer groups."""
    rollout: RolloutMode = "tree"
    """``tree``: AT-GRPO's best-of-N tree (Zhao et al. 2025): every agent step branches N ways from
    one shared state, the best branch continues, so all N samples of a group share one prompt.
    ``independent``: N whole episodes per problem (plain GRPO baseline and evaluation)."""
    selection: Selection = "greedy"
    """Which branch continues in the tree: ``greedy`` (highest reward, first on ties, as AT-GRPO) or
    ``random`` (an unbiased on-policy continuation, an ablation)."""
    group_by: GroupBy = "problem_agent_turn"
    """Group key for advantages. ``problem_agent_turn`` is AT-GRPO's (every sample in a group has
    the same prompt, GRPO's assumption); ``problem_agent`` and ``problem`` pool turns or agents as
    ablations. Every key contains the problem: groups never mix problems (docs/design.md trap 3)."""
    prompt_variants: list[str] = field(default_factory=lambda: list(DEFAULT_PROMPT_VARIANTS))
    """Read only by the prompt-conditioned trainer (``pettingllm train-variants``,
    :mod:`trainers.algorithms.variants`): K instructions that condition the G first-turn rollouts of each
    question round-robin (rollout i gets variant i mod K) on one shared model. The advantage group
    stays the whole question (all variants together), so the model learns which strategy works.
    An empty list (``--prompt-variants '[]'``) is the temperature-only baseline at the same budget."""
    regime: Regime = "shared"
    """``shared``: one policy for all roles; ``per_role``: one policy per role (AT-GRPO's
    role-specialised setting). ``policy_map`` overrides both."""
    policy_map: dict[str, str] = field(default_factory=dict)
    """Role -> policy name. Roles with the same name share a policy; empty: derived from ``regime``."""
    seats: dict[str, str] = field(default_factory=dict)
    """Role -> seat spec (``scripted``, ``random``, ``openai:<model>@<base_url>``, ``hf:<model folder>``;
    on the command line also ``role=SPEC[,role=SPEC]``): those roles are played by their seats and
    do not train; the others do (:mod:`trainers.rollout.seated`: a seat's turn is not branched, what
    it pays a trained role reaches that role's samples, every role's return is logged). docs/seats.md."""

    def policy_for_roles(self, roles: Sequence[str]) -> dict[str, str]:
        """The role -> policy-name map for an env with these roles."""
        if self.policy_map:
            missing = [r for r in roles if r not in self.policy_map]
            if missing:
                raise ValueError(f"policy_map has no entry for roles {missing}")
            return {r: self.policy_map[r] for r in roles}
        if self.regime == "shared":
            return dict.fromkeys(roles, "shared")
        return {r: r for r in roles}


@dataclass(frozen=True)
class OutputConfig:
    """What an AT-GRPO run reports beside ``metrics.jsonl`` and its checkpoints."""

    dump_samples: str | None = None
    """JSONL file that receives every training sample (prompt, completion, rewards, advantage)."""
    tensorboard: bool = True
    """Also log to TensorBoard when ``torch.utils.tensorboard`` is importable."""
    progress: bool = True
    """Show a tqdm progress bar."""


@dataclass
class TrainConfig(ConfigTree):
    """Everything an AT-GRPO run needs, section by section (module docstring).
    ``pettingllm train --help`` lists the settings by section."""

    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelSpec = field(default_factory=ModelSpec)
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    update: UpdateSettings = field(default_factory=UpdateSettings)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    run: RunConfig = field(default_factory=RunConfig)
    output: OutputConfig = field(default_factory=OutputConfig)

    def validate(self) -> None:
        """Coerce every setting to its declared type in place (YAML reads ``1e-6`` as a string,
        the command line gives strings) and check it against its allowed range, then the
        combinations of settings. Raises :class:`ConfigError`, one line naming the setting, the
        value and what is allowed."""
        try:
            self.rollout = dataclasses.replace(self.rollout, seats=seat_assignments(self.rollout.seats))
        except ValueError as error:
            raise ConfigError(f"config field 'seats': {error}") from None
        self.check_fields()
        generation = self.generation
        if generation.generation_backend == "openai" and not generation.openai_base_url.strip():
            raise ConfigError("generation_backend='openai' needs openai_base_url (the server root including /v1)")
        if self.run.steps > 0 and not generation.off_policy_generation \
                and not backend(generation.generation_backend).follows_updates:
            raise ConfigError(f"generation_backend={generation.generation_backend!r} cannot load the trainer's "
                              "weights, so every step after the first would train on a stale policy's samples: "
                              "set off_policy_generation=true to train off-policy (truncated IS against the "
                              "server's log-probs), or use a backend that follows the updates (transformers, vllm)")
        if not self.model.model:
            raise ConfigError("model is required: a local model directory (pettingllm tiny-model DIR) or a hub id")

    def update_settings(self) -> UpdateSettings:
        """The ``update`` section with ``importance_sampling: auto`` decided for this run's
        generation backend (:func:`~trainers.learning.settings.resolved`)."""
        exact = backend(self.generation.generation_backend).logprob_source == "exact"
        return resolved(self.update, exact_logprobs=exact)

    def uses_truncated_is(self) -> bool:
        """Whether the update weighs tokens by truncated importance sampling (``importance_sampling``)."""
        return self.update_settings().importance_sampling == "truncated"

    def policy_for_roles(self, roles: Sequence[str]) -> dict[str, str]:
        """The role -> policy-name map for an env with these roles (:meth:`RolloutConfig.policy_for_roles`)."""
        return self.rollout.policy_for_roles(roles)


#: The allowed range of every numeric setting: the shared sections' and the rollout's.
TrainConfig.set_bounds({
    **SHARED_BOUNDS,
    "problems_per_step": Bound(1),
    # A group of one sample is degenerate (zero advantage) by definition: n_samples 1 trains nothing.
    "n_samples": Bound(2),
})
