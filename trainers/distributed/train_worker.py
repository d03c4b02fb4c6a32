"""Data-parallel PPO updates: one torch.distributed group of training-worker actors per policy.

Every rank of a policy's group holds the whole policy and its AdamW state (DDP's layout) and
runs the project's one update, :func:`trainers.learning.update.ppo_update`, on its shard of the
policy's samples, with :class:`~trainers.learning.update.UpdateHooks` that make the shards add up to
the full batch:

* ``reduce_totals``: the normalisers (completion tokens, sequences) are all-reduced, so every
  rank divides by the whole batch's;
* ``reduce_gradients``: once per epoch, after the last micro-batch's backward, every
  gradient is all-reduced (SUM) in flat buckets. The sum of the shards' gradients is the
  full batch's gradient, so every rank clips the same norm and takes the same optimiser step:
  the weights stay identical across ranks and equal the single-process update up to float
  summation order.

The update exchanges gradients once per epoch instead of in every backward (DDP's hooks fire
per backward and need the wrapped module's own forward, which the scorer bypasses to run the
decoder and the LM head in chunks), so ranks do not wrap their models in
``DistributedDataParallel``; the arithmetic is DDP's. The backend is gloo on CPUs (tested
here) and NCCL on GPUs (``DistributedConfig.torch_backend``). Parameter sharding (FSDP2) is
not implemented: a policy must fit on one device with its optimiser state (docs/scaling.md).

Rank 0 alone writes checkpoints (into the driver's temporary checkpoint directory, which the
driver renames into place, :meth:`trainers.algorithms.atgrpo.train.Trainer.save_checkpoint`); since every rank
holds the whole optimiser state, a checkpoint resumes on any world size.
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.distributed.engine import policy_roles, weight_state
from trainers.generation.protocol import Generation
from trainers.learning.update import UpdateHooks, UpdateSettings, UpdateStats, ppo_update

#: Gradient elements all-reduced per collective (DDP's default bucket is 25 MB of float32).
BUCKET_ELEMENTS = 25 * 2**20 // 4


@dataclass
class TrainSample:
    """What the update reads of a sample (:class:`trainers.learning.update.UpdateSample`), without the
    prompt's messages: what travels to the training workers."""

    completion: Generation
    advantage: float
    degenerate: bool


def all_reduce_gradients(parameters: Sequence[torch.nn.Parameter]) -> None:
    """SUM-all-reduce every parameter's ``.grad`` in place, in flat buckets of at most
    :data:`BUCKET_ELEMENTS` elements of one dtype and device."""
    bucket: list[torch.Tensor] = []
    size = 0
    for p in parameters:
        grad = p.grad
        if bucket and (size + grad.numel() > BUCKET_ELEMENTS or grad.dtype != bucket[0].dtype
                       or grad.device != bucket[0].device):
            _reduce_bucket(bucket)
            bucket, size = [], 0
        bucket.append(grad)
        size += grad.numel()
    if bucket:
        _reduce_bucket(bucket)


def _reduce_bucket(grads: list[torch.Tensor]) -> None:
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    offset = 0
    for g in grads:
        g.copy_(flat[offset:offset + g.numel()].view_as(g))
        offset += g.numel()


def all_reduce_totals(tokens: float, sequences: float, *, device: torch.device) -> tuple[float, float]:
    """The whole batch's normalisers: the ranks' token and sequence counts summed (float64,
    exact for any count a batch can have), on ``device`` (NCCL reduces GPU tensors only)."""
    totals = torch.tensor([tokens, sequences], dtype=torch.float64, device=device)
    dist.all_reduce(totals, op=dist.ReduceOp.SUM)
    return float(totals[0]), float(totals[1])


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
                 init_dir: str | None) -> None:
        from trainers.models.policy_set import PolicySet

        self.config = config
        self.policy = policy
        self.rank = rank
        self.world_size = world_size
        self.policies = PolicySet(config, policy_roles(config, roles, policy), init_dir=init_dir)

    def rendezvous(self) -> tuple[str, int]:
        """Rank 0: where the group meets."""
        return free_address()

    def join(self, address: str, port: int, backend: str, timeout_s: float) -> None:
        """Join the group (every rank calls this at once); a rank that never arrives fails the
        others after ``timeout_s``, never a hang."""
        dist.init_process_group(backend, init_method=f"tcp://{address}:{port}", rank=self.rank,
                                world_size=self.world_size, timeout=timedelta(seconds=timeout_s))

    def update(self, shard: list[TrainSample], settings: UpdateSettings) -> dict[str, Any]:
        """:func:`~trainers.learning.update.ppo_update` on this rank's shard, gradients summed over the group."""
        if self.world_size == 1:
            hooks = UpdateHooks()
        else:
            hooks = UpdateHooks(reduce_totals=functools.partial(all_reduce_totals, device=self.policies.device),
                                reduce_gradients=all_reduce_gradients)
        return asdict(ppo_update(self.policies, self.policy, shard, settings, hooks=hooks))

    def weights(self, merged: bool) -> Any:
        """The policy's weights for its engines (:func:`trainers.distributed.engine.weight_state`)."""
        with self.policies.active(self.policy) as model:
            return weight_state(model, self.policy, lora=self.config.lora, merged=merged)

    def parameters_snapshot(self) -> dict[str, torch.Tensor]:
        """The trainable parameters (tests compare ranks and the single-process run)."""
        return self.policies.snapshot(self.policy)

    def save(self, directory: str) -> None:
        """Write the policy where :meth:`trainers.models.policy_set.PolicySet.save` would (rank 0 only is asked)."""
        self.policies.save(Path(directory))

    def optimizer_state(self) -> dict[str, Any]:
        return self.policies.optimizer_state()

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
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
