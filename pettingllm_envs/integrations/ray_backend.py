"""Episodes and sandboxed programs on Ray actors, for work that outgrows one machine.

The local path (``play_episode``, ``sandbox.execute_many``) stays the default and needs no
Ray; this backend runs the *same* functions inside long-lived actors, so results are
identical for the same seeds and the only change is where the work happens::

    from pettingllm_envs.integrations.ray_backend import RayBackend

    with RayBackend() as backend:                      # ray.init() on this machine
        episodes = backend.play_episodes("plan_path_v0", "scripted", seeds=range(100))
        results = backend.execute_many(programs)       # sandbox verdicts, input order

    RayBackend(address="auto")                         # join a running cluster (ray start ...)

Each actor keeps its env instances (and its sandbox fork server) warm across calls.
Work is handed out in small chunks through an ``ActorPool``, so a slow episode or program
does not hold up the rest. Ray is imported only when a backend is created (the ray extra:
``pip install -e '.[ray]'`` in a checkout).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pettingllm_envs.episodes import Episode, play_episode
from pettingllm_envs.extras import extra_hint
from pettingllm_envs.policies import Policy
from pettingllm_envs.registry import make
from pettingllm_envs.sandbox import ExecutionResult, execute_many

#: Environment variable that sets the number of actors when ``RayBackend(num_workers=None)``.
WORKERS_VARIABLE = "PETTINGLLM_RAY_WORKERS"
#: Actors started by default at most: each holds envs and a sandbox fork server, so one per CPU of a
#: large cluster would hold much memory for work that rarely needs it; set the variable to go beyond.
DEFAULT_MAX_WORKERS = 8

#: A policy object, one per role, or a seat spec string (``scripted``, ``random``,
#: ``openai:<model>@<base_url>``, ``hf:<path>``) that each actor builds for itself, so
#: that, e.g., every actor opens its own connection to a shared vLLM server.
PolicyLike = str | Policy | Mapping[str, Policy]


class _Worker:
    """The actor: plays episodes and runs sandbox batches with the local code paths."""

    def __init__(self) -> None:
        self._envs: dict[str, Any] = {}
        self._policies: dict[tuple[str, str, int], Policy] = {}

    def play(
        self, env_id: str, config: dict[str, Any], policy: PolicyLike, seeds: list[int],
        options: dict[str, Any] | None, max_tokens: int,
    ) -> list[Episode]:
        key = f"{env_id}:{sorted(config.items())!r}"
        if key not in self._envs:
            self._envs[key] = make(env_id, **config)
        if isinstance(policy, str):
            policy = self._spec_policy(policy, env_id, max_tokens, seeds[0] if seeds else 0)
        return [play_episode(self._envs[key], policy, seed=seed, options=options) for seed in seeds]

    def _spec_policy(self, spec: str, env_id: str, max_tokens: int, seed: int) -> Policy:
        from pettingllm_envs.seats import build_policy

        # The random policy is seeded with the chunk's first seed and rebuilt per chunk, so
        # a chunk's actions do not depend on which chunks this actor played before. Model
        # policies (clients, loaded models) are built once per actor and reused.
        if spec == "random":
            return build_policy(spec, env_id, "multi", max_tokens, seed)[0]
        if (spec, env_id, max_tokens) not in self._policies:
            self._policies[spec, env_id, max_tokens] = build_policy(spec, env_id, "multi", max_tokens, 0)[0]
        return self._policies[spec, env_id, max_tokens]

    def execute(
        self, programs: list[str], stdins: list[str] | None, workers: int, options: dict[str, Any]
    ) -> list[ExecutionResult]:
        return execute_many(programs, stdins=stdins, workers=workers, **options)

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()


def default_workers(cluster_cpus: float, cpus_per_worker: float = 1.0) -> int:
    """Actors to start when none are asked for: ``$PETTINGLLM_RAY_WORKERS`` when set, else one per
    ``cpus_per_worker`` CPUs of the cluster, between 1 and :data:`DEFAULT_MAX_WORKERS`."""
    setting = os.environ.get(WORKERS_VARIABLE, "").strip()
    if setting:
        if not setting.isdigit() or int(setting) < 1:
            raise ValueError(f"{WORKERS_VARIABLE} must be a whole number >= 1, got {setting!r}")
        return int(setting)
    return max(1, min(DEFAULT_MAX_WORKERS, int(cluster_cpus // cpus_per_worker)))


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as error:  # pragma: no cover - depends on the install
        raise ImportError(f"the Ray backend needs Ray, {extra_hint('ray')}") from error
    return ray


class RayBackend:
    """A pool of Ray actors that play episodes and run sandboxed programs.

    ``address``: None starts (or reuses) a local Ray; ``"auto"`` joins the cluster this
    machine belongs to; ``"ray://host:10001"`` connects a Ray client. ``num_workers``
    defaults to ``$PETTINGLLM_RAY_WORKERS`` when set, else to the cluster's CPUs divided by
    ``cpus_per_worker``, at most :data:`DEFAULT_MAX_WORKERS`. ``init_kwargs`` go to
    ``ray.init`` when this backend starts Ray (e.g. ``num_cpus=2``, ``runtime_env``).
    """

    def __init__(
        self,
        num_workers: int | None = None,
        *,
        address: str | None = None,
        cpus_per_worker: float = 1.0,
        **init_kwargs: Any,
    ) -> None:
        ray = _import_ray()
        from ray.util import ActorPool

        self._ray = ray
        if not ray.is_initialized():
            ray.init(address=address, **init_kwargs)
        if num_workers is None:
            num_workers = default_workers(ray.cluster_resources().get("CPU", 1), cpus_per_worker)
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        actor_class = ray.remote(num_cpus=cpus_per_worker)(_Worker)
        self.workers = [actor_class.remote() for _ in range(num_workers)]
        self._pool = ActorPool(self.workers)

    def __enter__(self) -> RayBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def play_episodes(
        self,
        env_id: str,
        policy: PolicyLike,
        seeds: Iterable[int],
        *,
        options: dict[str, Any] | None = None,
        chunk_size: int = 1,
        max_tokens: int = 1024,
        **config: Any,
    ) -> list[Episode]:
        """``play_episode(make(env_id, **config), policy, seed=s, options=options)`` for every
        seed, on the actors, returned in seed order. ``max_tokens`` applies to spec policies."""
        seeds = list(seeds)
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        policy_ref = policy if isinstance(policy, str) else self._ray.put(policy)
        chunks = [seeds[i : i + chunk_size] for i in range(0, len(seeds), chunk_size)]
        results = self._pool.map(
            lambda actor, chunk: actor.play.remote(env_id, config, policy_ref, chunk, options, max_tokens), chunks
        )
        return [episode for chunk in results for episode in chunk]

    def execute_many(
        self,
        programs: Sequence[str],
        *,
        stdins: Sequence[str] | None = None,
        chunk_size: int | None = None,
        workers_per_actor: int = 1,
        **options: Any,
    ) -> list[ExecutionResult]:
        """``sandbox.execute_many`` spread over the actors; results keep the input order.
        ``options`` are those of ``sandbox.execute`` (timeout, memory_mb, ...)."""
        if stdins is not None and len(stdins) != len(programs):
            raise ValueError("stdins must have one entry per program")
        if not programs:
            return []
        if chunk_size is None:  # a few chunks per actor: balanced, yet cheap to schedule
            chunk_size = max(1, math.ceil(len(programs) / (4 * len(self.workers))))
        starts = range(0, len(programs), chunk_size)
        chunks = [
            (list(programs[i : i + chunk_size]), None if stdins is None else list(stdins[i : i + chunk_size]))
            for i in starts
        ]
        results = self._pool.map(
            lambda actor, chunk: actor.execute.remote(chunk[0], chunk[1], workers_per_actor, options), chunks
        )
        return [result for chunk in results for result in chunk]

    def shutdown(self) -> None:
        """Close the actors' envs and end the actors (Ray itself keeps running)."""
        if not self.workers:
            return
        self._ray.get([worker.close.remote() for worker in self.workers])
        for worker in self.workers:
            self._ray.kill(worker)
        self.workers = []
