"""The scale-out section of a run: how many of each Ray actor, and what each one gets.

One :class:`DistributedConfig` next to the run's :class:`~trainers.algorithms.atgrpo.config.TrainConfig`
describes the whole layout (docs/scaling.md has one for 1 GPU, 8 GPUs on a node, several nodes):

* **rollout workers** hold the envs (and their sandboxes) of a share of each step's problems;
* **generation engines**, ``engines_per_policy`` per policy, sample completions with the
  train config's ``generation_backend`` (``transformers`` on CPUs or GPUs, ``vllm`` on GPUs);
* **training workers**, ``train_workers_per_policy`` per policy, form one torch.distributed
  group per policy and update it data-parallel (each policy of ``per_role`` on its own group).

Resources go into Ray placement groups: the rollout workers in one group, each policy's
engines and training workers in another, with separate bundles (``placement: separate``) or
one bundle per training rank shared with an engine (``colocated``: fractional GPUs, engine and
trainer on one device). Nothing here imports Ray or torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.algorithms.atgrpo.options import config_from_args
from trainers.harness.errors import ConfigError
from trainers.harness.fields import Bound, check_field

Placement = Literal["separate", "colocated"]
PlacementStrategy = Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"]
DistBackend = Literal["auto", "gloo", "nccl"]
#: How a policy's training ranks split the work (:mod:`trainers.distributed.data_parallel`).
DataParallel = Literal["ddp", "fsdp"]
#: How a policy's weights reach its engines after an update (:mod:`trainers.distributed.weight_sync`).
WeightSync = Literal["object_store", "broadcast"]


@dataclass
class DistributedConfig:
    """Where a run's actors go. ``pettingllm train-ray --help`` lists the fields."""

    bounds: ClassVar[Mapping[str, Bound]]
    """The allowed range of every numeric field
    (:func:`trainers.harness.fields.check_field`); set below."""

    address: str = "local"
    """Ray to use: ``local`` starts (or reuses) a Ray on this machine; ``auto`` joins the
    cluster this machine belongs to (``ray start --head`` / ``ray start --address``);
    ``ray://host:10001`` connects a Ray client; ``host:6379`` a cluster's head."""
    local_cpus: int = 0
    """Logical CPUs of a Ray started here (0: the machine's count). Actors reserve logical CPUs,
    so a laptop can run more actors than cores by raising it."""
    rollout_workers: int = 2
    """Rollout-worker actors; each step's problems are dealt out to them in contiguous shares."""
    rollout_worker_cpus: float = 1.0
    """Logical CPUs each rollout worker reserves (its envs and sandbox programs run there)."""
    engines_per_policy: int = 1
    """Generation engines of each policy; a call's prompts are split over them by prompt, and
    per-request seeds make the samples independent of the split."""
    engine_cpus: float = 1.0
    """Logical CPUs each engine reserves."""
    engine_gpus: float = 0.0
    """GPUs each engine reserves (a vLLM engine needs one; a fraction with ``placement:
    colocated`` shares a GPU with a training worker, ``vllm_gpu_memory_utilization`` of
    the train config then bounds the engine's share of its memory)."""
    train_workers_per_policy: int = 1
    """Data-parallel ranks of each policy: the torch.distributed world size of its group."""
    train_worker_cpus: float = 1.0
    """Logical CPUs each training worker reserves."""
    train_worker_gpus: float = 0.0
    """GPUs each training worker reserves (0: CPU training with gloo)."""
    placement: Placement = "separate"
    """``separate``: engines and training workers get their own bundles (separate pools);
    ``colocated``: training rank k and engine k share bundle k (needs engines_per_policy <=
    train_workers_per_policy)."""
    placement_strategy: PlacementStrategy = "PACK"
    """Ray's placement-group strategy for each pool: PACK (few nodes), SPREAD, or their strict forms."""
    data_parallel: DataParallel = "ddp"
    """How each policy's training ranks train it (:mod:`trainers.distributed.data_parallel`): ``ddp``
    keeps a full replica on each (DistributedDataParallel: fastest while the policy, its gradients
    and AdamW state fit one device); ``fsdp`` shards them over the ranks (FSDP2: for policies that
    do not fit). One rank trains without either."""
    dist_backend: DistBackend = "auto"
    """torch.distributed backend of the training groups: ``auto`` is nccl when the training
    workers have GPUs, else gloo."""
    weight_sync: WeightSync = "object_store"
    """How updated weights reach the engines: ``object_store`` (rank 0's state dict through Ray's
    object store) or ``broadcast`` (a gloo/NCCL broadcast from a single-rank training group into
    the transformers engines' parameters, :mod:`trainers.distributed.weight_sync`); vLLM engines and
    multi-rank groups always use the object store."""
    call_timeout_s: float = 600.0
    """Longest wait for any actor call (a rollout step's env work, a generation batch, an
    update). Past it the actor counts as failed: rollout workers are replaced, anything else
    fails the step with an error naming the actor; never a hang."""
    max_worker_restarts: int = 3
    """Rollout workers replaced within one rollout before it fails with an error."""
    step_retries: int = 1
    """Times one step's rollout, weight push or evaluation is run again after a rollout worker or
    engine died or hung in it (:mod:`trainers.distributed.faults`: the dead actors replaced, the
    same samples); past it, or when a training worker fails, the run stops with one line saying
    how to ``--resume`` from the last checkpoint."""

    def validate(self) -> None:
        """Coerce and check every field (YAML and the command line give strings), then the
        combinations; raises :class:`~trainers.harness.errors.ConfigError` naming the field."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, check_field(f.name, getattr(self, f.name), DistributedConfig))
        if not self.address.strip():
            raise ConfigError("distributed field 'address' is empty: use local, auto, ray://host:port or host:port")
        if self.placement == "colocated" and self.engines_per_policy > self.train_workers_per_policy:
            raise ConfigError(f"placement 'colocated' puts engine k on training rank k's bundle: engines_per_policy "
                              f"({self.engines_per_policy}) must be <= train_workers_per_policy "
                              f"({self.train_workers_per_policy})")
        if self.dist_backend == "nccl" and self.train_worker_gpus <= 0:
            raise ConfigError("dist_backend 'nccl' needs GPU training workers (train_worker_gpus > 0)")

    def torch_backend(self) -> str:
        """The torch.distributed backend the training groups use."""
        if self.dist_backend == "auto":
            return "nccl" if self.train_worker_gpus > 0 else "gloo"
        return self.dist_backend


_AT_LEAST_ONE, _NON_NEGATIVE = Bound(1), Bound(0)
DistributedConfig.bounds = {
    "local_cpus": _NON_NEGATIVE,
    "rollout_workers": _AT_LEAST_ONE,
    "rollout_worker_cpus": _NON_NEGATIVE,
    "engines_per_policy": _AT_LEAST_ONE,
    "engine_cpus": _NON_NEGATIVE,
    "engine_gpus": _NON_NEGATIVE,
    "train_workers_per_policy": _AT_LEAST_ONE,
    "train_worker_cpus": _NON_NEGATIVE,
    "train_worker_gpus": _NON_NEGATIVE,
    "call_timeout_s": Bound(0, low_open=True),
    "max_worker_restarts": _NON_NEGATIVE,
    "step_retries": _NON_NEGATIVE,
}


#: The generation backends that run in engine actors (the OpenAI-compatible one is a server already).
ENGINE_BACKENDS = ("transformers", "vllm")


def check_layout(train: TrainConfig, config: DistributedConfig) -> None:
    """The combinations of the two configs that cannot run, refused before any actor starts."""
    backend = train.generation.generation_backend
    if backend not in ENGINE_BACKENDS:
        raise ConfigError(f"generation_backend {backend!r} cannot run in engine actors; "
                          f"allowed with train-ray: {', '.join(ENGINE_BACKENDS)}")
    if backend == "vllm" and config.engine_gpus <= 0:
        raise ConfigError("generation_backend 'vllm' runs on GPUs: set the distributed field engine_gpus > 0")
    if train.rollout.rollout != "tree":
        raise ConfigError("train-ray runs tree rollouts (rollout: tree); independent rollouts stay single-process")


def distributed_config(values: dict[str, Any] | None = None, *, file: str | None = None,
                       prog: str = "pettingllm train-ray") -> DistributedConfig:
    """A validated layout: defaults < the YAML mapping in ``file`` (``--distributed``) < ``values``
    (a mapping of fields, or the command line's options); unknown keys are refused with the
    close match (:func:`trainers.algorithms.atgrpo.options.config_from_args`, the trainers' one config machinery)."""
    values = dict(values or {})
    known = {f.name for f in dataclasses.fields(DistributedConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        from pettingllm_envs.commandline.errors import did_you_mean

        raise ConfigError(f"unknown distributed keys {unknown}{did_you_mean(unknown[0], sorted(known))}")
    if file is not None:
        values["config"] = file
    return config_from_args(values, cls=DistributedConfig, prog=prog, file_option="--distributed")
