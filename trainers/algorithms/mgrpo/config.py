"""M-GRPO's configuration: :class:`MGRPOConfig`, built on the trainers' config machinery.

The fields every trainer shares (the task, the policies, sampling, advantages, the PPO loss
and update, the run) are :class:`trainers.algorithms.atgrpo.config.PolicyConfig`'s, so M-GRPO reads
``eps_low``, ``max_grad_norm``, ``kl_coef``... exactly as AT-GRPO does and feeds the same
update (:mod:`trainers.learning.update`). The fields below are M-GRPO's own. A config loads from YAML
(``--config run.yaml``) and the command line (``pettingllm train-mgrpo --help``) with the same
coercion, range checks and one-line errors as ``pettingllm train``
(:func:`trainers.algorithms.atgrpo.field_checks.check_field`). Defaults fit a CPU smoke run with the tiny model.

References cited below:

* M-GRPO: Hong et al. 2025, "Multi-Agent Deep Research: Training Multi-Agent Systems with
  M-GRPO" (group-relative advantages for the main agent and the sub-agent, trajectory
  alignment to a fixed number of sub-trajectories, decoupled trainers that exchange only
  statistics through a shared store).
* GRPO: Shao et al. 2024, "DeepSeekMath" (group-relative advantages, no critic).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from trainers.algorithms.atgrpo.config import BOUNDS, PolicyConfig
from trainers.algorithms.atgrpo.field_checks import Bound
from trainers.algorithms.mgrpo.alignment import Trim
from trainers.harness.errors import ConfigError

Mode = Literal["mgrpo", "frozen_sub", "single"]
#: Every mode, in the order of :data:`Mode` (the one list of them).
MODES: tuple[Mode, ...] = typing.get_args(Mode)


@dataclass
class MGRPOConfig(PolicyConfig):
    """An M-GRPO run (docs/design.md §6): :class:`~trainers.algorithms.atgrpo.config.PolicyConfig`'s fields with
    M-GRPO's defaults for ``env``, ``steps`` and ``run_dir``, plus the fields below."""

    env: str = "research_v0"
    """Registered env id of an env that declares the
    :class:`~pettingllm_envs.capabilities.Delegation` capability: which role delegates (the main
    agent), which serves (the sub-agent), which delegation a sub action belongs to and what each
    delegation earned (``research_v0`` does). Checked when a run starts, before a model loads."""
    steps: int = 2
    """Training steps: one rollout of every question, then one update per trained policy."""
    run_dir: str = "runs/mgrpo"
    """Where ``config.json``, ``history.jsonl``, ``metrics.jsonl``, the checkpoints and (by default)
    the SQLite store go (:mod:`trainers.harness.run_dir`)."""
    checkpoint_every: int = 50
    """Write a checkpoint every K steps (and after the last step); 0: only after the last step.
    Each side of a two-process run checkpoints its own policy at the same steps."""
    keep_checkpoints: int = 2
    """Most recent checkpoints kept on disk (per side)."""
    resume: bool = False
    """Continue the run in ``run_dir`` from its latest checkpoint exactly as if never stopped
    (the saved config is restored and checked: :mod:`trainers.harness.run_history`)."""
    overwrite: bool = False
    """Delete what an earlier run left in ``run_dir`` and start again. Without this or ``resume``
    a run dir that holds a run is refused."""
    eval_every: int = 0
    """Evaluate the current policies every K steps and after the last step
    (:mod:`trainers.algorithms.mgrpo.evaluation`); 0: never (the default, for quick runs)."""
    eval_problems: int = 32
    """Held-out questions per evaluation: ids 0 .. K-1 of ``eval_split``, one rollout each."""
    eval_split: str = "test"
    """Split the evaluation questions come from: held out from ``split``."""

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

    bounds: ClassVar[Mapping[str, Bound]] = {
        **PolicyConfig.bounds,
        "questions_per_step": Bound(1),
        "rollouts": Bound(2),  # a group of one rollout is degenerate by definition: nothing would train
        "d_max": Bound(1),
        "timeout_s": Bound(0, low_open=True),
        "threads": Bound(1),
        "checkpoint_every": BOUNDS["checkpoint_every"],
        "keep_checkpoints": BOUNDS["keep_checkpoints"],
        "eval_every": BOUNDS["eval_every"],
        "eval_problems": BOUNDS["eval_problems"],
    }

    def validate(self) -> None:
        """Coerce and check every field (:meth:`~trainers.algorithms.atgrpo.config.PolicyConfig.check_fields`);
        raises :class:`~trainers.harness.errors.ConfigError`, one line naming the field and what is allowed."""
        self.check_fields()
        if not self.model:
            raise ConfigError("model is required: a local model directory (pettingllm tiny-model DIR) or a hub id")

    def store_url(self) -> str:
        return self.store or str(Path(self.run_dir) / "store.db")


__all__ = ["MODES", "MGRPOConfig", "Mode"]
