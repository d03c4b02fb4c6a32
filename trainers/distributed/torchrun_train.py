"""AT-GRPO under ``torchrun``: every process a data-parallel rank, rank 0 also the trainer.

    torchrun --nproc-per-node 4 -m trainers.distributed.torchrun_train \\
        --env plan_path_v0 --model DIR --steps 100 --run-dir RUN [--data-parallel ddp|fsdp]

Every ``pettingllm train`` option works (the run's :class:`~trainers.algorithms.atgrpo.config.TrainConfig`,
read by rank 0 alone; the others get it from rank 0). ``--data-parallel`` picks DDP (default) or
FSDP2 (:mod:`trainers.distributed.data_parallel`); ``--dist-timeout-s`` bounds any wait on another
rank (the other ranks wait while rank 0 rolls out a step).

**Who does what.** Rank 0 runs :class:`~trainers.algorithms.atgrpo.train.Trainer`'s own loop:
rollouts, advantages, evaluation, logs and checkpoints, with completions from a generation engine
of its own per policy (:class:`~trainers.distributed.engine.GenerationEngine`, the run's
``generation_backend`` on an unsharded copy of the policy, as the Ray trainer's engines are: a
sharded model cannot sample on one rank). The training itself is every rank's: each policy is a
:class:`~trainers.distributed.data_parallel.DataParallelPolicy` on every rank, and rank 0 drives the
others with commands it broadcasts (:class:`RankGroup`): build the policies, update on these shards,
gather the weights for the engines, save, gather or load the optimiser state, stop. Rank 0 runs each
command's local part with the same code, so the ranks' collectives pair up by construction.

Checkpoints are the single-process trainer's (written once by rank 0 into the harness's temporary
directory and renamed into place), so a run resumes with any ``--nproc-per-node``, under
``pettingllm train``, or under ``pettingllm train-ray``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.algorithms.atgrpo.train import Trainer, run
from trainers.distributed.config import DataParallel
from trainers.distributed.data_parallel import DataParallelPolicy
from trainers.distributed.engine import GenerationEngine, generation_config_of
from trainers.distributed.train_worker import TrainSample, combine_stats, shard
from trainers.generation.protocol import Generation, LogprobSource, check_seeds
from trainers.learning.settings import UpdateSettings
from trainers.learning.update import UpdateStats, trainable
from trainers.models.policy_set import PolicySet, describe_policies
from trainers.models.prompts import PromptEncoder
from trainers.rollout.episodes import Sample

PROG = "torchrun -m trainers.distributed.torchrun_train"


class RankGroup:
    """This rank's data-parallel policies and the commands every rank runs together (module docstring)."""

    def __init__(self, mode: DataParallel) -> None:
        self.mode = mode
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.policies: dict[str, DataParallelPolicy] = {}
        self.commands: dict[str, Callable[..., Any]] = {
            "build": self.build, "update": self.update, "weights": self.weights, "save": self.save,
            "optimizer_state": self.optimizer_state, "load_optimizer_state": self.load_optimizer_state}

    # -------------------------------------------------------------- driving and following
    def call(self, command: str, *args: Any) -> Any:
        """Rank 0: every other rank runs ``command`` with ``args``, and so does this one; its result."""
        dist.broadcast_object_list([(command, args)], src=0)
        return self.commands[command](*args)

    def stop(self) -> None:
        dist.broadcast_object_list([("stop", ())], src=0)

    def follow(self) -> None:
        """Any other rank: run rank 0's commands until it says stop."""
        while True:
            box: list[Any] = [None]
            dist.broadcast_object_list(box, src=0)
            command, args = box[0]
            if command == "stop":
                return
            self.commands[command](*args)

    # ----------------------------------------------------------------------- commands
    def build(self, config: TrainConfig, role_to_policy: dict[str, str], init_dir: str | None) -> None:
        """Each policy in a policy set of its own (its roles), wrapped; weights from ``init_dir`` when resuming."""
        for name in sorted(set(role_to_policy.values())):
            roles = {role: name for role, policy in role_to_policy.items() if policy == name}
            self.policies[name] = DataParallelPolicy(PolicySet(config.model, roles, init_dir=init_dir,
                                                               reference=config.update.kl_coef > 0), name, self.mode)

    def update(self, shards: dict[str, list[list[TrainSample]]], settings: UpdateSettings) -> dict[str, UpdateStats]:
        out = {}
        for name, parts in shards.items():
            own = asdict(self.policies[name].update(parts[self.rank], settings))
            every: list[Any] = [None] * self.world_size
            dist.all_gather_object(every, own)
            out[name] = combine_stats(every)
        return out

    def weights(self, name: str, merged: bool) -> Any:
        return self.policies[name].engine_weights(merged=merged, keep=self.rank == 0)

    def save(self, directory: str) -> None:
        for policy in self.policies.values():
            policy.save(Path(directory), write=self.rank == 0)

    def optimizer_state(self) -> dict[str, Any]:
        return {name: state for policy in self.policies.values() for name, state in policy.optimizer_state().items()}

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        for policy in self.policies.values():
            policy.load_optimizer_state(state)


class RankPolicies(PromptEncoder):
    """Rank 0's view of the policies for the trainer: the tokenizer side here, the models on every
    rank (:class:`RankGroup`), as :class:`~trainers.distributed.trainer.RemotePolicies` is for Ray."""

    def __init__(self, config: TrainConfig, role_to_policy: dict[str, str], group: RankGroup) -> None:
        from transformers import AutoTokenizer

        super().__init__(AutoTokenizer.from_pretrained(config.model.model), generation_config_of(config.model.model),
                         config.model.max_prompt_tokens)
        self.config, self.group = config, group
        self.role_to_policy = role_to_policy
        self.names = sorted(set(role_to_policy.values()))

    def save(self, directory: Path) -> None:
        self.group.call("save", str(directory))

    def optimizer_state(self) -> dict[str, Any]:
        return self.group.call("optimizer_state")

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        self.group.call("load_optimizer_state", state)

    def describe(self) -> str:
        return describe_policies(self.config.model, self.role_to_policy) + \
            f"; {self.group.mode} over {self.group.world_size} ranks"


class LocalEngines:
    """:class:`~trainers.generation.protocol.Generator` over one
    :class:`~trainers.distributed.engine.GenerationEngine` per policy in this process (rank 0)."""

    follows_updates = True

    def __init__(self, config: TrainConfig, roles: Sequence[str], names: Sequence[str]) -> None:
        self.engines = {name: GenerationEngine(config, list(roles), name) for name in names}
        self.logprob_source: LogprobSource = "engine" if config.generation.generation_backend == "vllm" else "exact"
        self.merged_weights = config.generation.generation_backend == "vllm"

    def generate(self, policy: str, prompts: Sequence[Sequence[int]], n: int, *,
                 seeds: Sequence[int] | None = None) -> list[Generation]:
        check_seeds(prompts, n, seeds)
        return self.engines[policy].generate([list(p) for p in prompts], n, None if seeds is None else list(seeds))

    def sync(self, policy: str, model: Any) -> None:
        raise NotImplementedError("the torchrun trainer loads gathered weights (TorchrunTrainer.push_weights)")

    def close(self) -> None:
        self.engines = {}


class TorchrunTrainer(Trainer):
    """:class:`~trainers.algorithms.atgrpo.train.Trainer` on rank 0 with the training on every rank
    (module docstring). Call :meth:`close` at the end: it releases the other ranks."""

    def __init__(self, config: TrainConfig, group: RankGroup) -> None:
        self.group = group
        super().__init__(config)

    def make_policies(self, init_dir: Path | None) -> RankPolicies:
        role_to_policy = self.config.policy_for_roles(self.trained_roles)
        self.group.call("build", self.config, role_to_policy, None if init_dir is None else str(init_dir))
        return RankPolicies(self.config, role_to_policy, self.group)

    def make_generator(self, checkpoint: Path | None) -> LocalEngines:
        assert isinstance(self.policies, RankPolicies)
        generator = LocalEngines(self.config, self.trained_roles, self.policies.names)
        self.generator = generator
        for name in self.policies.names:  # the engines start from the base model: give them the run's weights
            self.push_weights(name)
        return generator

    def push_weights(self, name: str) -> None:
        assert isinstance(self.generator, LocalEngines)
        self.generator.engines[name].load_weights(self.group.call("weights", name, self.generator.merged_weights))

    def update_policies(self, samples: Sequence[Sample]) -> dict[str, UpdateStats]:
        assert isinstance(self.policies, RankPolicies)
        settings = self.config.update_settings()
        shards = {}
        for name in self.policies.names:
            own = [TrainSample(s.completion, s.advantage, s.degenerate) for s in samples
                   if self.policies.role_to_policy[s.agent] == name]
            shards[name] = shard(trainable(own, settings), self.group.world_size)
        stats = self.group.call("update", shards, settings)
        for name, policy_stats in stats.items():
            if policy_stats.samples:
                self.push_weights(name)
        return stats

    def close(self) -> None:
        self.group.stop()


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """This entry's own options; the rest are ``pettingllm train``'s."""
    parser = argparse.ArgumentParser(prog=PROG, add_help=False)
    parser.add_argument("--data-parallel", choices=["ddp", "fsdp"], default="ddp",
                        help="DDP (full replicas, faster where a policy fits) or FSDP2 (shards weights, gradients "
                             "and AdamW state); default ddp")
    parser.add_argument("--dist-backend", choices=["auto", "gloo", "nccl"], default="auto",
                        help="torch.distributed backend; auto: nccl with CUDA, else gloo")
    parser.add_argument("--dist-timeout-s", type=float, default=7200.0,
                        help="longest wait on another rank, a step's rollout included (default 7200)")
    return parser.parse_known_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Every rank runs this (torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)."""
    own, rest = parse(sys.argv[1:] if argv is None else argv)
    if "-h" in rest or "--help" in rest:
        from trainers.algorithms.atgrpo.options import build_parser

        print(f"{PROG} options: --data-parallel {{ddp,fsdp}} --dist-backend {{auto,gloo,nccl}} --dist-timeout-s S")
        build_parser(PROG, "AT-GRPO on torchrun ranks (docs/fsdp.md).").parse_args(["--help"])
    backend = own.dist_backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend, timeout=timedelta(seconds=own.dist_timeout_s))
    try:
        group = RankGroup(own.data_parallel)
        if group.rank != 0:
            group.follow()
            return 0
        from pettingllm_envs.commandline.checks import check_env_config, check_model
        from trainers.algorithms.atgrpo.options import load_run_config

        config = load_run_config(rest, prog=PROG)
        check_env_config(config.task.env, config.task.env_kwargs)
        check_model(config.model.model)
        trainer: TorchrunTrainer | None = None
        try:
            trainer = TorchrunTrainer(config, group)
            return run(trainer, "torchrun_train", layout=f"data_parallel={own.data_parallel}x{group.world_size} ")
        finally:
            if trainer is not None:
                trainer.close()
            else:
                group.stop()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    raise SystemExit(main())
