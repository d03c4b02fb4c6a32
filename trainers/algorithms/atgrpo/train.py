"""The AT-GRPO training loop: rollout -> group advantages -> PPO-clip update, per policy.

Read top to bottom: :class:`Trainer` sets up the env factory, the policies, the run
directory and (with ``resume``) the checkpoint; :meth:`Trainer.run_step` collects and updates
for one step; :meth:`Trainer.update` is the micro-batched, gradient-accumulated, clipped PPO
update of one policy with the samples of the roles it plays; :meth:`Trainer.save_checkpoint`
writes everything needed to continue bit-for-bit. The loop around the steps (evaluation and
checkpoint schedule, logging, profile, progress) is the harness's
:class:`~trainers.harness.loop.TrainingLoop`, which M-GRPO runs too; the run dir, checkpoints,
resume and logs are :mod:`trainers.harness.run_dir`'s.

``pettingllm train --env plan_path_v0 --model DIR --steps 2 --run-dir RUN`` runs it.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar

import torch

import pettingllm_envs
from pettingllm_envs.commandline.checks import check_env_config, check_model
from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.algorithms.atgrpo.options import load_run_config
from trainers.algorithms.generation_setup import build_generator, generation_choices
from trainers.generation import Generation, Generator
from trainers.harness.errors import ConfigError
from trainers.harness.loop import Schedule, TrainingLoop
from trainers.harness.profile import TOKENS_GENERATED, TOKENS_TRAINED, StepProfile, timed_rollout
from trainers.harness.run_dir import (
    CHECKPOINTS,
    METRICS,
    Checkpoints,
    Progress,
    append_jsonl,
    check_run_dir,
    restore_training_state,
    save_training_state,
    start_logs,
)
from trainers.harness.run_dir import interruption_note as harness_interruption_note
from trainers.harness.run_history import check_resume, record_start
from trainers.learning.metrics import action_reward_metrics, group_metrics, update_metrics
from trainers.learning.update import UpdateStats, ppo_update
from trainers.maths.advantages import group_advantages, group_key
from trainers.maths.evaluation import evaluation_metrics
from trainers.maths.seeding import RequestSeeds, derive_seed, isolated_rng, seed_everything
from trainers.models.policy_set import PolicySet
from trainers.profiling.phases import count, phase
from trainers.rollout.episodes import (
    LocalTree,
    Messages,
    RolloutResult,
    Sample,
    TreeStates,
    drive_tree,
    independent_rollout,
)
from trainers.rollout.seated import TrainerSeats, return_metrics, seated_tree_rollout


def reward_metrics(samples: Sequence[Sample], successes: Sequence[bool],
                   success_metric: str = "rollout/success_rate") -> dict[str, float]:
    """Mean reward overall, per agent and per turn, and the rollout's success rate under
    ``success_metric`` (``tree/success_rate`` for tree rollouts: the best-of-N search's, not
    the policy's; ``eval/success_rate`` is the policy's) (pure)."""
    metrics = {**action_reward_metrics((s.agent, s.reward) for s in samples),
               success_metric: statistics.fmean(successes) if successes else 0.0}
    by_turn: dict[int, list[float]] = defaultdict(list)
    for s in samples:
        by_turn[s.turn].append(s.reward)
    metrics.update({f"reward/turn/{t}": statistics.fmean(v) for t, v in sorted(by_turn.items())})
    return metrics


def progress_success(metrics: dict[str, float]) -> dict[str, str]:
    """The success figures of a step for a progress line, each under its own name so that the
    tree's best-of-N rate is never read as the policy's."""
    names = {"tree/success_rate": "tree_success", "rollout/success_rate": "rollout_success",
             "eval/success_rate": "eval_success"}
    return {short: f"{metrics[key]:.3f}" for key, short in names.items() if key in metrics}


def progress_fields(metrics: dict[str, float]) -> dict[str, str]:
    """A step's progress-bar figures: the mean reward and the success rates."""
    return {"reward": f"{metrics['reward/mean']:.3f}", **progress_success(metrics)}


class Trainer:
    """One training run (see the module docstring): the parts of AT-GRPO's step that
    :class:`~trainers.harness.loop.TrainingLoop` runs (:meth:`run_step`, :meth:`evaluate`,
    :meth:`save_checkpoint`)."""

    #: The rollout plays ``config.rollout.seats``. A trainer whose rollout is its own (first-turn
    #: rollouts, envs on Ray actors) says False and refuses seats.
    plays_seats: ClassVar[bool] = True

    def __init__(self, config: TrainConfig) -> None:
        config.validate()
        self.config = config
        self.run_dir = Path(config.run.run_dir)
        # before any work; the dir itself is made once setup succeeded
        check_run_dir(self.run_dir, resume=config.run.resume, overwrite=config.run.overwrite,
                      dump_samples=config.output.dump_samples)
        changed_on_resume = check_resume(self.run_dir, config, resume=config.run.resume)
        probe = self.make_env()
        self.roles = list(probe.possible_agents)
        probe.close()
        self.seats = self.make_seats()
        self.trained_roles = [r for r in self.roles if r not in config.rollout.seats]
        seed_everything(config.run.seed)
        self.step = 0
        self.checkpoints = Checkpoints(self.run_dir / CHECKPOINTS, config.run.keep_checkpoints)
        checkpoint = self.checkpoints.latest() if config.run.resume else None
        self.policies = self.make_policies(checkpoint / "policies" if checkpoint else None)
        self.request_seeds = RequestSeeds(config.run.seed)
        if checkpoint is not None:
            state = restore_training_state(checkpoint, [self.policies])
            self.step = state["step"]
            self.request_seeds.load_state_dict(state["request_seeds"])
        logs = [self.run_dir / METRICS] + ([Path(config.output.dump_samples)] if config.output.dump_samples else [])
        start_logs(self.run_dir, logs, resume=config.run.resume, overwrite=config.run.overwrite, step=self.step)
        self.generator = self.make_generator(checkpoint)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.chosen = generation_choices(config)
        record_start(self.run_dir, config, resume=config.run.resume, step=self.step, to_step=config.run.steps,
                     changed=changed_on_resume, chosen=self.chosen)
        self.tensorboard = self._tensorboard()
        self.samples: list[Sample] = []  # the last step's, for the log
        schedule = Schedule(config.run.steps, config.evaluation.eval_every, config.run.checkpoint_every)
        self.loop = TrainingLoop(self, schedule,
                                 profile=StepProfile(self.run_dir, config.run.profile, resume=config.run.resume),
                                 log=lambda metrics: self.log(metrics, self.samples), progress_fields=progress_fields)

    # ------------------------------------------------------------------ setup
    # make_policies, make_generator and tree_states are where the run's parts live; the
    # distributed trainer (trainers.distributed.trainer) puts them on Ray actors.
    def make_policies(self, init_dir: Path | None) -> PolicySet:
        """The run's policies, from ``init_dir`` (a checkpoint's ``policies/``) when resuming."""
        return PolicySet(self.config.model, self.config.policy_for_roles(self.trained_roles), init_dir=init_dir,
                         reference=self.config.update.kl_coef > 0)

    def make_seats(self) -> TrainerSeats | None:
        """The seats of ``config.rollout.seats`` (:mod:`trainers.rollout.seated`), checked; None without seats.
        A trainer whose rollout plays no seats (``plays_seats``) refuses them."""
        if not self.config.rollout.seats:
            return None
        if not self.plays_seats:
            raise ConfigError(f"seats: {type(self).__name__} has a rollout of its own that plays no seats; "
                              "train with seats through pettingllm train")
        try:
            config = self.config
            return TrainerSeats.checked(config.rollout.seats, config.task.env, self.roles, config.rollout.policy_map,
                                        max_tokens=config.model.max_new_tokens)
        except ValueError as error:
            raise ConfigError(str(error)) from None

    def make_generator(self, checkpoint: Path | None) -> Generator:
        """The generation backend of the config (:func:`trainers.algorithms.generation_setup.build_generator`)."""
        return build_generator(self.config, self.policies, checkpoint=checkpoint)

    def tree_states(self, problems: Sequence[int]) -> TreeStates:
        """Where a tree rollout's live states are held: here, one env per problem."""
        return LocalTree(self.make_env, problems, self.config.task.split)

    def make_env(self) -> Any:
        kwargs = dict(self.config.task.env_kwargs)
        return pettingllm_envs.make(self.config.task.env, **kwargs)

    def _tensorboard(self) -> Any:
        if not self.config.output.tensorboard:
            return None
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # tensorboard is optional; metrics.jsonl is always written
            return None
        return SummaryWriter(str(self.run_dir / "tensorboard"), purge_step=self.step + 1)

    def sampler(self, agent: str, prompts: Sequence[Messages], n: int) -> list[list[Generation]]:
        """The rollout's sampler: agent's policy, every prompt, n completions, one batch."""
        encodings = [self.policies.encode_prompt(messages) for messages in prompts]
        ids = [encoding.ids for encoding in encodings]
        flat = self.generator.generate(self.policies.role_to_policy[agent], ids, n,
                                       seeds=self.request_seeds.next_call(len(ids), n))
        groups = [flat[i * n:(i + 1) * n] for i in range(len(prompts))]
        for encoding, group in zip(encodings, groups, strict=True):
            for generation in group:  # the samples say when their prompt lost history to max_prompt_tokens
                generation.prompt_truncated = encoding.truncated
        return groups

    # ------------------------------------------------------------------- step
    def rollout(self, step: int) -> RolloutResult:
        cfg = self.config
        problems = [step * cfg.rollout.problems_per_step + j for j in range(cfg.rollout.problems_per_step)]
        self.request_seeds.begin("train", step)
        seat_seed = derive_seed(cfg.run.seed, "seats", step)  # the seeded seats' draws, per step: resume stays exact
        n, selection = cfg.rollout.n_samples, cfg.rollout.selection
        if cfg.rollout.rollout == "tree":
            # A per-step RNG for random selection: independent of everything else, so resume is exact.
            rng = random.Random(derive_seed(cfg.run.seed, "selection", step))
            if self.seats is not None:
                return seated_tree_rollout(self.make_env, problems, n, self.sampler, self.seats.policies(seat_seed),
                                           split=cfg.task.split, selection=selection, rng=rng)
            return drive_tree(self.tree_states(problems), n, self.sampler, selection=selection, rng=rng)
        advance = None if self.seats is None else self.seats.advance(seat_seed)
        return independent_rollout(self.make_env, problems, n, self.sampler, split=cfg.task.split, advance=advance)

    def evaluate(self, step: int | None = None) -> dict[str, float]:
        """The current policy after step ``step`` (default: the steps run so far) on ``eval_problems``
        held-out problems (:mod:`trainers.maths.evaluation`): one independent episode each,
        sampled at the training temperature, in an RNG stream of its own (seeded by the run's
        seed and step), so evaluating changes nothing else."""
        cfg = self.config
        step = self.step if step is None else step
        self.request_seeds.begin("eval", step)
        with isolated_rng(derive_seed(cfg.run.seed, "eval", step)), torch.no_grad():
            result = independent_rollout(self.make_env, list(range(cfg.evaluation.eval_problems)), 1, self.sampler,
                                         split=cfg.evaluation.eval_split,
                                         advance=None if self.seats is None else
                                         self.seats.advance(derive_seed(cfg.run.seed, "eval-seats", step)))
        return evaluation_metrics(result.successes, result.returns, self.roles)

    def train_step(self) -> dict[str, float]:
        """The next step, whole (:meth:`trainers.harness.loop.TrainingLoop.one_step`): rollout,
        advantages, updates, the evaluation when due, logged; returns its metrics."""
        return self.loop.one_step(self.step + 1)

    def run_step(self, step: int) -> dict[str, float]:
        """Step ``step`` (1-based) up to its update: rollout, advantages, one update per policy;
        returns the step's metrics."""
        cfg = self.config
        result = timed_rollout(lambda: self.rollout(step - 1))
        samples = result.samples
        for s in samples:
            s.group = group_key(s.problem, s.agent, s.turn, cfg.rollout.group_by)
        advantages, degenerate, stats = group_advantages([s.reward for s in samples], [s.group for s in samples],
                                                         normalize=cfg.update.normalize, eps=cfg.update.adv_eps)
        for s, adv, deg in zip(samples, advantages, degenerate, strict=True):
            s.advantage, s.degenerate = adv, deg
        update_start = time.perf_counter()
        with phase("update"):
            update_stats = self.update_policies(samples)
        seconds_update = time.perf_counter() - update_start
        self.step = step
        self.samples = samples

        metrics: dict[str, float] = {"step": step}
        metrics.update(reward_metrics(samples, result.successes, result.success_metric))
        metrics.update(group_metrics(stats.groups, stats.degenerate))
        # every role's return along the played episodes, the seated ones' included: in tree mode the
        # live path's payments reach these, while each sample carries its own branch's continuation
        metrics.update(return_metrics(result.returns, self.roles))
        metrics.update(update_metrics(update_stats))
        metrics.update({
            "tokens": sum(len(s.completion.completion_ids) for s in samples),
            "samples": len(samples),
            "time/generate": result.seconds_generate,
            "time/env": result.seconds_env,
            "time/tree": result.seconds_tree,
            "time/continuation": result.seconds_continuation,
            "time/update": seconds_update,
        })
        count(TOKENS_GENERATED, metrics["tokens"])
        count(TOKENS_TRAINED, sum(stats.tokens for stats in update_stats.values()))
        return metrics

    def update_policies(self, samples: Sequence[Sample]) -> dict[str, UpdateStats]:
        """Every policy's update, by name: one after the other here; the distributed trainer
        runs its policies' training groups at once."""
        return {name: self.update(name, samples) for name in self.policies.names}

    def update(self, name: str, samples: Sequence[Sample]) -> UpdateStats:
        """The PPO-clip update (:func:`trainers.learning.update.ppo_update`) of policy ``name`` on the
        samples of the roles it plays."""
        own = [s for s in samples if self.policies.role_to_policy[s.agent] == name]
        out = ppo_update(self.policies, name, own, self.config.update_settings())
        if out.samples:
            with self.policies.active(name) as model, phase("weight_sync"):
                self.generator.sync(name, model)  # the next rollout samples the updated policy
        return out

    # ----------------------------------------------------------------- logging
    def log(self, metrics: dict[str, float], samples: Sequence[Sample]) -> None:
        append_jsonl(self.run_dir / METRICS, metrics)
        if self.tensorboard is not None:
            for key, value in metrics.items():
                if key != "step":
                    self.tensorboard.add_scalar(key, value, self.step)
            self.tensorboard.flush()
        if self.config.output.dump_samples:
            path = Path(self.config.output.dump_samples)
            path.parent.mkdir(parents=True, exist_ok=True)
            decode = self.policies.tokenizer.decode
            with open(path, "a") as f:
                for s in samples:
                    f.write(json.dumps({
                        "step": self.step, "problem_id": s.problem, "branch": s.branch, "agent": s.agent,
                        "turn": s.turn, "group": s.group, "prompt": decode(s.completion.prompt_ids),
                        "completion": s.text, "reward": s.reward, "reward_global": s.reward_global,
                        "reward_local": s.reward_local, "reward_later": s.reward_later, "advantage": s.advantage,
                        "degenerate": s.degenerate,
                        "selected": s.selected, "policy": self.policies.role_to_policy[s.agent],
                        "prompt_truncated": s.prompt_truncated,
                    }) + "\n")

    # ------------------------------------------------------------- checkpoints
    def latest_checkpoint(self) -> Path | None:
        return self.checkpoints.latest()

    def save_checkpoint(self, step: int | None = None) -> Path:
        """Write ``checkpoints/step_K`` (K: ``step``, default the steps run so far) atomically
        (:class:`trainers.harness.run_dir.Checkpoints`): a crash at any moment leaves the previous
        checkpoint intact and pointed to."""
        step = self.step if step is None else step
        state = {"step": step, "request_seeds": self.request_seeds.state_dict(), "config": asdict(self.config)}
        return self.checkpoints.save(step, lambda folder: save_training_state(folder, [self.policies], state))

    # -------------------------------------------------------------------- loop
    def train(self, on_step: Callable[[dict[str, float]], None] | None = None) -> list[dict[str, float]]:
        """Run until ``config.run.steps`` (:class:`~trainers.harness.loop.TrainingLoop`); checkpoint every
        ``checkpoint_every`` steps and at the end."""
        progress = Progress(self.config.output.progress, total=self.config.run.steps, initial=self.step, desc="AT-GRPO")
        history = self.loop.run(self.step, progress=progress, on_step=on_step)
        if self.tensorboard is not None:
            self.tensorboard.close()
        return history


def train(config: TrainConfig) -> list[dict[str, float]]:
    """Train with ``config``; returns the metrics of the steps run."""
    return Trainer(config).train()


def main(argv: Sequence[str] | None = None) -> int:
    """``pettingllm train [--config FILE.yaml] [--field VALUE ...]``."""
    config = load_run_config(argv)
    check_env_config(config.task.env, config.task.env_kwargs)
    check_model(config.model.model)
    return run(Trainer(config), "train")


def interruption_note(trainer: Trainer, command: str) -> str:
    """:func:`trainers.harness.run_dir.interruption_note` for ``trainer``'s run."""
    return harness_interruption_note(trainer.latest_checkpoint(), step=trainer.step, steps=trainer.config.run.steps,
                                     run_dir=trainer.run_dir, command=command)


def run(trainer: Trainer, command: str, layout: str = "") -> int:
    """Train to the last step with the command's first and last lines on stderr (``layout``:
    what the first line adds, e.g. where the distributed trainer's actors are)."""
    seats = f"seats={trainer.config.rollout.seats} " if trainer.config.rollout.seats else ""  # played, not trained
    print(f"[{command}] env={trainer.config.task.env} roles={trainer.roles} {seats}{trainer.policies.describe()} "
          f"{layout}"
          f"run_dir={trainer.run_dir} from step {trainer.step}", file=sys.stderr)
    try:
        history = trainer.train()
    except KeyboardInterrupt:
        print(f"[{command}] {interruption_note(trainer, command)}", file=sys.stderr)
        raise  # the command line reports it and exits with status 130
    if history:
        last = history[-1]
        success = " ".join(f"{k}={v}" for k, v in progress_success(last).items())
        print(f"[{command}] step {last['step']}: reward/mean={last['reward/mean']:.4f} {success} "
              f"metrics in {trainer.run_dir / METRICS}", file=sys.stderr)
    return 0
