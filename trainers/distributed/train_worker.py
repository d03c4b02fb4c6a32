"""Training workers: the ranks of one policy's torch.distributed group, as Ray actors.

Every rank builds the policy (:class:`~trainers.models.policy_set.PolicySet`, one policy); a group
of more than one rank wraps it in :class:`~trainers.distributed.data_parallel.DataParallelPolicy`
after joining (``DistributedConfig.data_parallel``: DDP by default, or FSDP2) and runs the
project's one update, :func:`trainers.learning.update.ppo_update`, on its shard of the policy's
samples, in lockstep with the other ranks. One rank trains the plain policy set, as the
single-process trainer does. The backend is gloo on CPUs (tested here) and NCCL on GPUs
(``DistributedConfig.torch_backend``).

Whatever reads whole weights or optimiser state (the engines' weights, saving, snapshots) is a
collective under FSDP: the driver calls it on every rank and uses rank 0's answer, and only rank 0
writes a checkpoint's files (into the driver's temporary checkpoint directory, which the driver
renames into place, :meth:`trainers.algorithms.atgrpo.train.Trainer.save_checkpoint`). The optimiser
state is gathered into the single-process layout, so a checkpoint resumes on any world size.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.distributed.config import DataParallel
from trainers.distributed.engine import policy_roles, weight_state
from trainers.generation.protocol import Generation
from trainers.learning.settings import UpdateSettings
from trainers.learning.update import UpdateStats, ppo_update


@dataclass
class TrainSample:
    """What the update reads of a sample (:class:`trainers.learning.update.UpdateSample`), without the
    prompt's messages: what travels to the training workers."""

    completion: Generation
    advantage: float
    degenerate: bool


def free_address() -> tuple[str, int]:
    """This node's IP and a TCP port free now: rank 0's rendezvous address."""
    import ray

    with socket.socket() as probe:
        probe.bind(("", 0))
        port = probe.getsockname()[1]
    return ray.util.get_node_ip_address(), port


class TrainWorker:
    """The actor: rank ``rank`` of policy ``policy``'s group (module docstring)."""

    def __init__(self, config: TrainConfig, roles: list[str], policy: str, rank: int, world_size: int,
                 init_dir: str | None, data_parallel: DataParallel = "ddp") -> None:
        from trainers.models.policy_set import PolicySet

        self.config = config
        self.policy = policy
        self.rank = rank
        self.world_size = world_size
        self.data_parallel = data_parallel
        self.policies = PolicySet(config.model, dict.fromkeys(policy_roles(config, roles, policy), policy),
                                  init_dir=init_dir, reference=config.update.kl_coef > 0)
        self.parallel: Any = None
        """The :class:`~trainers.distributed.data_parallel.DataParallelPolicy` once the group is joined."""

    def rendezvous(self) -> tuple[str, int]:
        """Rank 0: where the group meets."""
        return free_address()

    def join(self, address: str, port: int, backend: str, timeout_s: float) -> None:
        """Join the group and wrap the policy (every rank calls this at once); a rank that never
        arrives fails the others after ``timeout_s``, never a hang."""
        from trainers.distributed.data_parallel import DataParallelPolicy

        dist.init_process_group(backend, init_method=f"tcp://{address}:{port}", rank=self.rank,
                                world_size=self.world_size, timeout=timedelta(seconds=timeout_s))
        self.parallel = DataParallelPolicy(self.policies, self.policy, self.data_parallel)

    def update(self, shard: list[TrainSample], settings: UpdateSettings) -> dict[str, Any]:
        """:func:`~trainers.learning.update.ppo_update` on this rank's shard, in lockstep with the group."""
        if self.parallel is None:
            return asdict(ppo_update(self.policies, self.policy, shard, settings))
        return asdict(self.parallel.update(shard, settings))

    def weights(self, merged: bool) -> Any:
        """The policy's weights for its engines (:func:`trainers.distributed.engine.weight_state`);
        rank 0's answer, None on the others."""
        if self.parallel is not None:
            return self.parallel.engine_weights(merged=merged, keep=self.rank == 0)
        with self.policies.active(self.policy) as model:
            return weight_state(model, self.policy, lora=self.config.model.lora, merged=merged)

    def parameters_snapshot(self) -> dict[str, torch.Tensor]:
        """The trainable parameters, whole (tests compare ranks and the single-process run)."""
        if self.parallel is not None:
            return self.parallel.snapshot()
        return self.policies.snapshot(self.policy)

    def save(self, directory: str) -> None:
        """Write the policy where :meth:`trainers.models.policy_set.PolicySet.save` would (rank 0 writes)."""
        if self.parallel is not None:
            self.parallel.save(Path(directory), write=self.rank == 0)
        else:
            self.policies.save(Path(directory))

    def optimizer_state(self) -> dict[str, Any] | None:
        """The optimiser state in the single-process layout; rank 0's answer, None on the others."""
        if self.parallel is not None:
            state = self.parallel.optimizer_state()
            return state if self.rank == 0 else None
        return self.policies.optimizer_state()

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        if self.parallel is not None:
            self.parallel.load_optimizer_state(state)
        else:
            self.policies.load_optimizer_state({self.policy: state[self.policy]})

    def leave(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def combine_stats(per_rank: Sequence[dict[str, Any]]) -> UpdateStats:
    """One policy's :class:`~trainers.learning.update.UpdateStats` from its ranks': sums add up,
    ``grad_norm`` is the global norm every rank computed (rank 0's)."""
    fields = {k: sum(stats[k] for stats in per_rank) for k in per_rank[0] if k != "grad_norm"}
    return UpdateStats(**fields, grad_norm=per_rank[0]["grad_norm"])


def shard(samples: Sequence[Any], world_size: int) -> list[list[Any]]:
    """Contiguous, near-equal shares of ``samples``, one per rank (some may be empty)."""
    bounds = [len(samples) * k // world_size for k in range(world_size + 1)]
    return [list(samples[bounds[k]:bounds[k + 1]]) for k in range(world_size)]
