"""Ray as the controller: connect, reserve the pools in placement groups, place the actors.

:func:`connect` starts a local Ray or joins a cluster (``DistributedConfig.address``);
:class:`Pools` reserves one placement group for the rollout workers and one per policy for
its engines and training workers, waiting at most ``call_timeout_s`` for the cluster to have
the resources (then an error that says what was asked for, not a hang), and hands out the
Ray options that put an actor on its bundle. :func:`get` is every actor call's wait: bounded
by the same timeout, with the actor named in the error. A new actor's start (its creation
task: a process, the imports of torch and transformers, a model or env factory) is waited for
separately, up to :data:`ACTOR_START_TIMEOUT_S` (:func:`wait_started`): on a loaded machine it
takes longer than a call that ``call_timeout_s`` is sized for (a tiny model's engine took over
60 s to start on 2 busy cores, where its calls take well under a second).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pettingllm_envs.extras import extra_hint
from trainers.distributed.config import DistributedConfig


class ActorFailed(RuntimeError):
    """An actor died or did not answer within ``call_timeout_s``; the message names it."""


#: Longest wait for a new actor to start (see the module docstring).
ACTOR_START_TIMEOUT_S = 300.0
LOCAL_WORKER_NICENESS = 0
"""The priority of the workers of a Ray this process starts. Ray's default, niceness 15, makes its
workers yield to every other process of the machine; here the actors are the run's work (sampling,
updates), so any other busy process starved them: beside two busy loops on 2 cores an actor got ~4 %
of a core and took over 300 s to start and answer."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError as error:  # pragma: no cover - depends on the install
        raise ImportError(f"distributed training needs Ray, {extra_hint('ray')}") from error
    return ray


def connect(config: DistributedConfig) -> Any:
    """The ``ray`` module, initialised: an already running Ray of this process is reused,
    otherwise ``ray.init`` starts one here (``address: local``, with ``local_cpus``) or joins
    ``address``."""
    ray = import_ray()
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        local = config.address == "local"
        if local:
            kwargs["_system_config"] = {"worker_niceness": LOCAL_WORKER_NICENESS}
            if config.local_cpus:
                kwargs["num_cpus"] = config.local_cpus
        ray.init(address=None if local else config.address, **kwargs)
    return ray


def get(refs: Any, timeout_s: float, what: str) -> Any:
    """``ray.get(refs)`` within ``timeout_s``; a dead actor or a timeout is :class:`ActorFailed`
    naming ``what`` (the caller decides whether to replace the actor or fail the step)."""
    ray = import_ray()
    from ray.exceptions import GetTimeoutError, RayActorError

    try:
        return ray.get(refs, timeout=timeout_s)
    except GetTimeoutError as error:
        raise ActorFailed(f"{what} did not answer within {timeout_s:g} s") from error
    except RayActorError as error:
        raise ActorFailed(f"{what} died: {' '.join(str(error).split())[:300]}") from error


def wait_started(actors: Sequence[Any], what: str) -> None:
    """Wait until ``actors`` (new ones) have run their constructors, up to :data:`ACTOR_START_TIMEOUT_S`;
    their calls are then bounded by ``call_timeout_s`` alone."""
    get([actor.__ray_ready__.remote() for actor in actors], ACTOR_START_TIMEOUT_S, f"{what} (starting)")


def kill_all(actors: Iterable[Any]) -> None:
    """End ``actors`` at once (a hung one included) without Ray restarting them."""
    ray = import_ray()
    for actor in actors:
        ray.kill(actor, no_restart=True)


@dataclass(frozen=True)
class Slot:
    """Where one actor goes: a placement group's bundle, and what the actor itself reserves."""

    group: Any
    bundle: int
    cpus: float
    gpus: float

    def options(self) -> dict[str, Any]:
        """Ray ``.options(...)`` that place an actor here."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        return {"num_cpus": self.cpus, "num_gpus": self.gpus,
                "scheduling_strategy": PlacementGroupSchedulingStrategy(
                    placement_group=self.group, placement_group_bundle_index=self.bundle)}


def _bundle(cpus: float, gpus: float) -> dict[str, float]:
    bundle = {"CPU": cpus}
    if gpus > 0:
        bundle["GPU"] = gpus
    return bundle


class Pools:
    """The run's placement groups (see the module docstring); :meth:`remove` releases them."""

    def __init__(self, config: DistributedConfig, policies: Sequence[str]) -> None:
        ray = import_ray()
        from ray.util.placement_group import placement_group

        self.config = config
        self.groups: list[Any] = []
        rollout = placement_group([_bundle(config.rollout_worker_cpus, 0)] * config.rollout_workers,
                                  strategy=config.placement_strategy, name="pettingllm-rollout")
        self._wait(rollout, "rollout workers")
        self.rollout = [Slot(rollout, i, config.rollout_worker_cpus, 0) for i in range(config.rollout_workers)]
        self.engines: dict[str, list[Slot]] = {}
        self.trainers: dict[str, list[Slot]] = {}
        for name in policies:
            ranks, engines = config.train_workers_per_policy, config.engines_per_policy
            train = (config.train_worker_cpus, config.train_worker_gpus)
            engine = (config.engine_cpus, config.engine_gpus)
            if config.placement == "colocated":  # rank k and engine k share bundle k
                bundles = [_bundle(train[0] + (engine[0] if k < engines else 0),
                                   train[1] + (engine[1] if k < engines else 0)) for k in range(ranks)]
                engine_bundles = list(range(engines))
            else:
                bundles = [_bundle(*train)] * ranks + [_bundle(*engine)] * engines
                engine_bundles = list(range(ranks, ranks + engines))
            group = placement_group(bundles, strategy=config.placement_strategy, name=f"pettingllm-policy-{name}")
            self._wait(group, f"policy {name!r} (engines and training workers)")
            self.trainers[name] = [Slot(group, k, *train) for k in range(ranks)]
            self.engines[name] = [Slot(group, b, *engine) for b in engine_bundles]
        self._ray = ray

    def _wait(self, group: Any, what: str) -> None:
        self.groups.append(group)
        ray = import_ray()
        ready, _ = ray.wait([group.ready()], timeout=self.config.call_timeout_s)
        if not ready:
            self.remove()
            raise ActorFailed(f"the cluster cannot place the {what}: bundles {group.bundle_specs} were not available "
                              f"within call_timeout_s={self.config.call_timeout_s:g} s (cluster resources: "
                              f"{ray.cluster_resources()})")

    def remove(self) -> None:
        from ray.util.placement_group import remove_placement_group

        for group in self.groups:
            remove_placement_group(group)
        self.groups = []
