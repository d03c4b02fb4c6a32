"""M-GRPO's configuration: :class:`MGRPOConfig`, a tree of sections (:mod:`trainers.harness.config_tree`).

The sections every trainer shares (``task``, ``model``, ``update``, ``evaluation``, ``run``) are
the ones AT-GRPO's config holds, with M-GRPO's defaults, so M-GRPO reads ``eps_low``,
``max_grad_norm``, ``kl_coef``... exactly as AT-GRPO does and feeds the same update
(:mod:`trainers.learning.update`). :class:`MGRPOSettings` holds M-GRPO's own. A config loads
from YAML (``--config run.yaml``) and the command line (``pettingllm train-mgrpo --help``) with
the same coercion, range checks and one-line errors as ``pettingllm train``
(:func:`trainers.harness.fields.check_field`). Defaults fit a CPU smoke run with the tiny model.

References cited below:

* M-GRPO: Hong et al. 2025, "Multi-Agent Deep Research: Training Multi-Agent Systems with
  M-GRPO" (group-relative advantages for the main agent and the sub-agent, trajectory
  alignment to a fixed number of sub-trajectories, decoupled trainers that exchange only
  statistics through a shared store).
* GRPO: Shao et al. 2024, "DeepSeekMath" (group-relative advantages, no critic).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from trainers.algorithms.mgrpo.alignment import Trim
from trainers.harness.config_tree import ConfigTree
from trainers.harness.errors import ConfigError
from trainers.harness.fields import Bound
from trainers.harness.sections import BOUNDS as SHARED_BOUNDS
from trainers.harness.sections import EvaluationConfig, RunConfig, TaskConfig
from trainers.learning.settings import UpdateSettings, resolved
from trainers.models.spec import ModelSpec

Mode = Literal["mgrpo", "frozen_sub", "single"]
#: Every mode, in the order of :data:`Mode` (the one list of them).
MODES: tuple[Mode, ...] = typing.get_args(Mode)


@dataclass(frozen=True)
class MGRPOSettings:
    """What M-GRPO trains, how its groups are formed and how its two sides meet."""

    # ----------------------------------------------------------- what is trained
    mode: Mode = "mgrpo"
    """What is trained (the comparison of ``benchmarks/mgrpo_comparison.py``, as in Hong et al.
    2025): ``mgrpo``, main agent and sub-agent as separate policies, each from its own
    group-relative advantages; ``frozen_sub``, the same with the sub-agent never updated;
    ``single``, one policy plays both roles and every action gets its rollout's main advantage
    (single-agent GRPO)."""
    sub_model: str = ""
    """The sub-agent's model (local path); empty: ``model``, which is then the main agent's only.
    Separate models are the point of M-GRPO: the two roles' action distributions differ."""

    # ------------------------------------------------------------ rollouts, groups
    questions_per_step: int = 2
    """Questions per step; question ids are ``step * questions_per_step + j``, so that every mode
    and both sides of a two-process run see the same questions."""
    rollouts: int = 4
    """K: independent rollouts per question, the group size of both levels. The main agent's
    group is a question's K final rewards; the sub-agent's, the question's aligned
    sub-trajectories across the K rollouts. One rollout would make every group degenerate."""
    d_max: int = 2
    """Sub-trajectories per rollout after alignment (Hong et al. 2025): the main agent delegates
    a variable number of times, so every rollout is padded (duplicating its own
    sub-trajectories, seeded) or trimmed to exactly ``d_max``, which fixes the sub-agent's batch
    size; a rollout without a delegation yields empty slots that carry no weight."""
    trim: Trim = "random"
    """Which surplus sub-trajectories alignment drops: ``random`` (a seeded uniform choice,
    unbiased over delegation positions) or ``last`` (keeps the first ``d_max``)."""
    prefill: dict[str, str] = field(default_factory=dict)
    """Role -> text the assistant turn starts with (part of the prompt, so updates stay
    on-policy), e.g. ``{"main": "DELEGATE: "}`` so that an untrained model reaches the sub-agent
    at all; the action the env receives is prefill + completion. Keys must be the env's roles."""

    # -------------------------------------------------------------- two processes
    store: str = ""
    """Where the two sides meet (``sqlite:///file.db``, ``redis://host:port/0``,
    ``unix:///path/redis.sock``); empty: SQLite at ``run_dir/store.db``."""
    run_id: str = ""
    """The store namespace of this run, so runs never read each other's records; both sides
    must use the same one (:func:`~trainers.algorithms.mgrpo.train.run_two_process` draws one when empty)."""
    timeout_s: float = 300.0
    """How long a side waits for the other before :class:`~trainers.algorithms.mgrpo.store.StoreTimeout`
    (a dead or hung peer is an error, not a hang)."""
    threads: int = 1
    """torch threads of the sub side's process that :func:`~trainers.algorithms.mgrpo.train.run_two_process`
    spawns (two processes share the machine). Code running in the caller's process (``run_local``,
    the main side) leaves its thread count alone: it is process-wide state (``OMP_NUM_THREADS``
    sets it)."""



@dataclass
class MGRPOConfig(ConfigTree):
    """An M-GRPO run (docs/design.md §6), section by section: the shared sections with M-GRPO's
    defaults (the ``research_v0`` task, 2 steps, no evaluation) and :class:`MGRPOSettings`. The
    env must declare the :class:`~pettingllm_envs.capabilities.Delegation` capability: which role
    delegates (the main agent), which serves (the sub-agent), which delegation a sub action belongs
    to and what each delegation earned (``research_v0`` does); checked when a run starts, before
    a model loads. Each side of a two-process run checkpoints its own policy at the same steps."""

    task: TaskConfig = field(default_factory=lambda: TaskConfig(env="research_v0"))
    model: ModelSpec = field(default_factory=ModelSpec)
    update: UpdateSettings = field(default_factory=UpdateSettings)
    evaluation: EvaluationConfig = field(default_factory=lambda: EvaluationConfig(eval_every=0))
    run: RunConfig = field(default_factory=lambda: RunConfig(steps=2, run_dir="runs/mgrpo"))
    mgrpo: MGRPOSettings = field(default_factory=MGRPOSettings)

    def validate(self) -> None:
        """Coerce and check every setting (:meth:`~trainers.harness.config_tree.ConfigTree.check_fields`);
        raises :class:`~trainers.harness.errors.ConfigError`, one line naming the setting and what is allowed."""
        self.check_fields()
        if not self.model.model:
            raise ConfigError("model is required: a local model directory (pettingllm tiny-model DIR) or a hub id")

    def update_settings(self) -> UpdateSettings:
        """The ``update`` section as the update takes it: M-GRPO samples with the trained model
        itself, so ``importance_sampling: auto`` is ``none``."""
        return resolved(self.update, exact_logprobs=True)

    def store_url(self) -> str:
        return self.mgrpo.store or str(Path(self.run.run_dir) / "store.db")


MGRPOConfig.set_bounds({
    **SHARED_BOUNDS,
    "questions_per_step": Bound(1),
    "rollouts": Bound(2),  # a group of one rollout is degenerate by definition: nothing would train
    "d_max": Bound(1),
    "timeout_s": Bound(0, low_open=True),
    "threads": Bound(1),
})


__all__ = ["MODES", "MGRPOConfig", "MGRPOSettings", "Mode"]
