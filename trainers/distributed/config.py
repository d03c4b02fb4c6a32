"""The scale-out section of a run: how many of each Ray actor, and what each one gets.

One :class:`DistributedConfig` next to the run's :class:`~trainers.config.TrainConfig`
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
import typing
from dataclasses import dataclass
from typing import Any, Literal

from trainers.config import ConfigError, TrainConfig

Placement = Literal["separate", "colocated"]
PlacementStrategy = Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"]
DistBackend = Literal["auto", "gloo", "nccl"]


@dataclass
class DistributedConfig:
    """Where a run's actors go. ``pettingllm train-ray --help`` lists the fields."""

    address: str | None = None
    """Ray to use: None starts (or reuses) a local Ray on this machine; ``auto`` joins the
    cluster this machine belongs to (``ray start --head`` / ``ray start --address``);
    ``ray://host:10001`` connects a Ray client."""
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
    dist_backend: DistBackend = "auto"
    """torch.distributed backend of the training groups: ``auto`` is nccl when the training
    workers have GPUs, else gloo."""
    call_timeout_s: float = 600.0
    """Longest wait for any actor call (a rollout step's env work, a generation batch, an
    update). Past it the actor counts as failed: rollout workers are replaced, anything else
    fails the step with an error naming the actor; never a hang."""
    max_worker_restarts: int = 3
    """Rollout workers replaced within one rollout before it fails with an error."""

    def validate(self) -> None:
        """Coerce and check every field (YAML and the command line give strings), then the
        combinations; raises :class:`~trainers.config.ConfigError` naming the field."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, _check(f.name, getattr(self, f.name)))
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


_TYPES: dict[str, Any] = typing.get_type_hints(DistributedConfig)

#: Numeric fields: (lowest allowed, whether the lowest is excluded).
_LOWER: dict[str, tuple[float, bool]] = {
    "local_cpus": (0, False),
    "rollout_workers": (1, False),
    "rollout_worker_cpus": (0, False),
    "engines_per_policy": (1, False),
    "engine_cpus": (0, False),
    "engine_gpus": (0, False),
    "train_workers_per_policy": (1, False),
    "train_worker_cpus": (0, False),
    "train_worker_gpus": (0, False),
    "call_timeout_s": (0, True),
    "max_worker_restarts": (0, False),
}


def _fail(name: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"distributed field {name!r}: got {value!r} ({type(value).__name__}); allowed: {allowed}")


def _check(name: str, value: Any) -> Any:
    tp = _TYPES[name]
    if typing.get_origin(tp) is Literal:
        if value not in typing.get_args(tp):
            raise _fail(name, value, "one of " + ", ".join(typing.get_args(tp)))
        return value
    if tp == str | None:
        if value is not None and not (isinstance(value, str) and value.strip()):
            raise _fail(name, value, "a Ray address (auto, ray://host:port, host:port) or null")
        return value
    if isinstance(value, bool):  # bool is an int subclass; `rollout_workers: true` is a mistake
        raise _fail(name, value, "a number")
    try:
        number = tp(value) if isinstance(value, int | float | str) else None
    except ValueError:
        number = None
    if number is None or (tp is int and isinstance(value, float) and not value.is_integer()):
        raise _fail(name, value, "an integer" if tp is int else "a number")
    if number != number or number in (float("inf"), float("-inf")):  # NaN, infinities
        raise _fail(name, value, "a finite number")
    low, open_low = _LOWER[name]
    if number < low or (open_low and number == low):
        raise _fail(name, value, f"{'>' if open_low else '>='} {low:g}")
    return number


#: The generation backends that run in engine actors (the OpenAI-compatible one is a server already).
ENGINE_BACKENDS = ("transformers", "vllm")


def check_layout(train: TrainConfig, config: DistributedConfig) -> None:
    """The combinations of the two configs that cannot run, refused before any actor starts."""
    if train.generation_backend not in ENGINE_BACKENDS:
        raise ConfigError(f"generation_backend {train.generation_backend!r} cannot run in engine actors; "
                          f"allowed with train-ray: {', '.join(ENGINE_BACKENDS)}")
    if train.generation_backend == "vllm" and config.engine_gpus <= 0:
        raise ConfigError("generation_backend 'vllm' runs on GPUs: set the distributed field engine_gpus > 0")
    if train.rollout != "tree":
        raise ConfigError("train-ray runs tree rollouts (rollout: tree); independent rollouts stay single-process")


def distributed_config(values: dict[str, Any] | None) -> DistributedConfig:
    """A validated config from a mapping (a YAML ``distributed:`` section); unknown keys are
    refused with the close match."""
    values = dict(values or {})
    known = [f.name for f in dataclasses.fields(DistributedConfig)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        import difflib

        hints = "".join(f"; {k!r}: did you mean {m[0]!r}?" for k in unknown
                        if (m := difflib.get_close_matches(k, known, n=1)))
        raise ConfigError(f"unknown distributed keys {unknown}{hints}")
    config = DistributedConfig(**values)
    config.validate()
    return config
