"""The AT-GRPO trainer with its parts on Ray actors: same steps, same metrics, same checkpoints.

:class:`DistributedTrainer` is :class:`trainers.algorithms.atgrpo.train.Trainer` with its parts moved out of
the process through the trainer's hooks, and nothing else changed (advantages, metrics,
logging, evaluation, checkpoint layout and resume are the trainer's own code):

* ``make_policies``: :class:`RemotePolicies`, the driver's view of the policies: the
  tokenizer side here (prompts are encoded by the driver, as locally), the models and their
  optimisers on each policy's torch.distributed group of
  :class:`~trainers.distributed.train_worker.TrainWorker` actors;
* ``make_generator``: :class:`~trainers.distributed.engine.RayGenerator`, each policy's
  engine actors, given the training workers' weights before the first rollout and after
  every update;
* ``tree_states``: the step's problems on the rollout workers
  (:class:`~trainers.distributed.rollout.RemoteTree`).

``update_policies`` shards each policy's trainable samples over its ranks (FSDP2 or DDP,
:mod:`~trainers.distributed.data_parallel`), runs every policy's group at once,
and then pushes each updated policy's rank-0 weights to its engines. A checkpoint is the
trainer's: the driver writes the temporary directory (rank 0 of each group writes its policy
into it, the driver the optimiser state it fetched from rank 0, the RNG and the step) and
renames it into place, so it is written once and atomically, and resumes on another world
size (the optimiser state is gathered into the single-process layout).
Rank 0 writes into the driver's ``run_dir``: on several machines that path must be shared
storage (docs/scaling.md).

Evaluation episodes stay on the driver (one sampled episode per held-out problem); their
completions come from the engines.

A rollout worker or engine that dies mid-step costs a retried rollout, weight push or evaluation
(``train_step``, ``rollout``, ``update_policies`` and ``evaluate`` here; the policy in
:mod:`~trainers.distributed.faults`), the step's results unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.algorithms.atgrpo.train import Trainer, interruption_note
from trainers.distributed.cluster import ActorFailed, Pools, connect, get, import_ray, kill_all, wait_started
from trainers.distributed.config import DistributedConfig, check_layout
from trainers.distributed.engine import RayGenerator, generation_config_of
from trainers.distributed.faults import (
    NAMING_PROBE_S,
    StepFailed,
    StepRetries,
    revive_actors,
    silent_actors,
    stopped_message,
)
from trainers.distributed.rollout import EnvFactory, RemoteTree, RolloutPool
from trainers.distributed.train_worker import TrainSample, TrainWorker, combine_stats, shard
from trainers.learning.update import UpdateStats, trainable
from trainers.models.policy_set import describe_policies
from trainers.models.prompts import PromptEncoder
from trainers.rollout.episodes import RolloutResult, Sample


class RemotePolicies(PromptEncoder):
    """The driver's side of the run's policies (module docstring): the tokenizer, prompt
    encoding and stop ids (a :class:`~trainers.models.prompts.PromptEncoder`, what a
    :class:`~trainers.models.policy_set.PolicySet` is on its tokenizer side); saving, the optimiser
    state and updates go to the policy's training workers. There is no model here."""

    def __init__(self, config: TrainConfig, roles: Sequence[str], dist: DistributedConfig, pools: Pools, *,
                 init_dir: Path | None = None) -> None:
        from transformers import AutoTokenizer

        super().__init__(AutoTokenizer.from_pretrained(config.model.model), generation_config_of(config.model.model),
                         config.model.max_prompt_tokens)
        self.config = config
        self.role_to_policy = config.policy_for_roles(roles)
        self.names = sorted(set(self.role_to_policy.values()))
        self.timeout = dist.call_timeout_s
        ray = import_ray()
        actor = ray.remote(TrainWorker)
        self.groups: dict[str, list[Any]] = {}
        for name in self.names:
            slots = pools.trainers[name]
            self.groups[name] = [actor.options(**slot.options(), max_restarts=0).remote(
                config, list(roles), name, rank, len(slots), None if init_dir is None else str(init_dir),
                dist.data_parallel) for rank, slot in enumerate(slots)]
            workers = self.groups[name]
            wait_started(workers, f"the training group of {name!r}")
            if len(workers) > 1:
                address, port = get(workers[0].rendezvous.remote(), self.timeout, f"training rank 0 of {name!r}")
                get([w.join.remote(address, port, dist.torch_backend(), self.timeout) for w in workers], self.timeout,
                    f"the training group of {name!r} (joining torch.distributed)")

    def on_every_rank(self, name: str, call: str, *args: Any) -> list[Any]:
        """``call`` on every rank of policy ``name``'s group at once (under FSDP what reads whole
        weights or optimiser state is a collective); the references, rank 0's first."""
        return [getattr(worker, call).remote(*args) for worker in self.groups[name]]

    def rank0(self, name: str, call: str, what: str, *args: Any) -> Any:
        """Rank 0's answer to ``call`` made on every rank (:meth:`on_every_rank`)."""
        return get(self.on_every_rank(name, call, *args), self.timeout, what)[0]

    def update_all(self, samples: Sequence[Sample]) -> dict[str, UpdateStats]:
        """Every policy's data-parallel update on its own samples, all groups at once (the trainer
        then pushes each updated policy's weights to its engines)."""
        settings = self.config.update_settings()
        pending = {}
        for name in self.names:
            own = [TrainSample(s.completion, s.advantage, s.degenerate) for s in samples
                   if self.role_to_policy[s.agent] == name]
            workers = self.groups[name]
            shards = shard(trainable(own, settings), len(workers))
            pending[name] = [w.update.remote(part, settings) for w, part in zip(workers, shards, strict=True)]
        flat = get([ref for refs in pending.values() for ref in refs], self.timeout, "the training groups (update)")
        stats, start = {}, 0
        for name, refs in pending.items():
            stats[name] = combine_stats(flat[start:start + len(refs)])
            start += len(refs)
        return stats

    def push_weights(self, name: str, generator: RayGenerator) -> None:
        """Rank 0's current weights to the policy's engines: by broadcast from a single-rank group
        when the generator is set up for it, else through the object store."""
        if generator.broadcasts_from(name, self.groups[name]):
            return
        refs = self.on_every_rank(name, "weights", generator.merged_weights)
        generator.push(name, refs[0])
        get(refs[1:], self.timeout, f"the training group of {name!r} (gathering weights)")

    def save(self, directory: Path) -> None:
        """Each policy's rank 0 writes it to ``directory/<name>/`` (PolicySet's layout)."""
        get([ref for name in self.names for ref in self.on_every_rank(name, "save", str(directory))], self.timeout,
            "the training groups (saving the policies)")

    def optimizer_state(self) -> dict[str, Any]:
        return {name: self.rank0(name, "optimizer_state", "the training group (optimiser state)")[name]
                for name in self.names}

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        get([w.load_optimizer_state.remote(state) for name in self.names for w in self.groups[name]], self.timeout,
            "training workers (loading the optimiser state)")

    def snapshot(self, name: str) -> dict[str, Any]:
        return self.rank0(name, "parameters_snapshot", "the training group (parameters)")

    def rank_snapshots(self, name: str) -> list[dict[str, Any]]:
        """Every rank's view of the whole parameters (they must be identical)."""
        return get(self.on_every_rank(name, "parameters_snapshot"), self.timeout, "training workers")

    def describe(self) -> str:
        ranks = {name: len(workers) for name, workers in self.groups.items()}
        return describe_policies(self.config.model, self.role_to_policy) + \
            f"; data-parallel ranks per policy: {ranks}"

    def close(self) -> None:
        kill_all(worker for workers in self.groups.values() for worker in workers)
        self.groups = {}


class DistributedTrainer(Trainer):
    """:class:`trainers.algorithms.atgrpo.train.Trainer` on Ray actors (module docstring). Use it as a context
    manager (or call :meth:`close`) so that the actors and placement groups are released."""

    plays_seats: ClassVar[bool] = False  # its tree's envs live on rollout workers, which play no seats

    def __init__(self, config: TrainConfig, dist: DistributedConfig) -> None:
        dist.validate()
        config.validate()
        check_layout(config, dist)
        self.dist = dist
        self.pools: Pools | None = None
        self.rollout_pool: RolloutPool | None = None
        self.retries = StepRetries(dist.step_retries, self.revive)
        try:
            super().__init__(config)
        except BaseException:
            self.close()
            raise
        (self.run_dir / "distributed.json").write_text(json.dumps(asdict(dist), indent=2))  # next to config.json

    # the trainer's hooks ------------------------------------------------------------------------
    def make_policies(self, init_dir: Path | None) -> RemotePolicies:
        connect(self.dist)
        names = sorted(set(self.config.policy_for_roles(self.roles).values()))
        self.pools = Pools(self.dist, names)
        return RemotePolicies(self.config, self.roles, self.dist, self.pools, init_dir=init_dir)

    def make_generator(self, checkpoint: Path | None) -> RayGenerator:
        assert self.pools is not None and isinstance(self.policies, RemotePolicies)
        generator = RayGenerator(self.config, self.dist, self.roles, self.pools.engines,
                                 weight_sync=self.dist.weight_sync)
        for name in self.policies.names:  # the engines start from the base model: give them the run's weights
            self.policies.push_weights(name, generator)
        return generator

    def tree_states(self, problems: Sequence[int]) -> RemoteTree:
        if self.rollout_pool is None:
            assert self.pools is not None
            self.rollout_pool = RolloutPool(self.dist, self.pools.rollout,
                                            EnvFactory.of(self.config.task.env, self.config.task.env_kwargs))
        return self.rollout_pool.tree(problems, self.config.task.split)

    def update_policies(self, samples: Sequence[Sample]) -> dict[str, UpdateStats]:
        assert isinstance(self.policies, RemotePolicies)
        stats = self.policies.update_all(samples)
        for name, policy_stats in stats.items():
            if policy_stats.samples:  # the update is applied: a failed push is retried alone
                self.retries.run(f"step {self.step + 1}'s weight push to {name!r}",
                                 partial(self.policies.push_weights, name, self.generator))
        return stats

    # faults (trainers.distributed.faults) -------------------------------------------------------
    # A step's rollout, weight pushes and evaluation are each retried within ``step_retries``; past
    # them the step fails with StepFailed (the trainer cannot go on: resume from the last checkpoint).
    def run_step(self, step: int) -> dict[str, float]:
        self.retries.begin()
        with self.step_failure(step):
            return super().run_step(step)

    def rollout(self, step: int) -> RolloutResult:
        return self.retries.run(f"step {step + 1}'s rollout", partial(super().rollout, step))

    def evaluate(self, step: int | None = None) -> dict[str, float]:
        step = self.step if step is None else step
        with self.step_failure(step):
            return self.retries.run(f"step {step}'s evaluation", partial(super().evaluate, step))

    @contextmanager
    def step_failure(self, step: int) -> Iterator[None]:
        """An actor failure past the retries ends step ``step`` as :class:`StepFailed`, naming the
        silent actors; the trainer then counts the steps before it (nothing of the step was
        logged or checkpointed)."""
        try:
            yield
        except ActorFailed as failure:
            self.step = step - 1
            dead = silent_actors(self.rollout_pool, self.generator, min(NAMING_PROBE_S, self.dist.call_timeout_s))
            raise StepFailed(stopped_message(failure, dead=dead, retries=self.retries,
                                             note=interruption_note(self, "train-ray"))) from failure

    def revive(self) -> list[str]:
        """Replace the rollout workers and engines that no longer answer (replaced engines get their
        policy's current weights); their names."""
        assert isinstance(self.policies, RemotePolicies)
        return revive_actors(self.rollout_pool, self.generator, partial(self.policies.push_weights,
                                                                        generator=self.generator),
                             self.dist.call_timeout_s)

    # ---------------------------------------------------------------------------------- cleanup
    def close(self) -> None:
        """End the actors and release the placement groups (Ray itself keeps running)."""
        if self.rollout_pool is not None:
            self.rollout_pool.shutdown()
            self.rollout_pool = None
        generator = getattr(self, "generator", None)
        if isinstance(generator, RayGenerator):
            generator.close()
        policies = getattr(self, "policies", None)
        if isinstance(policies, RemotePolicies):
            policies.close()
        if self.pools is not None:
            self.pools.remove()
            self.pools = None

    def __enter__(self) -> DistributedTrainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
