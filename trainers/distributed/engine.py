"""Generation engines as Ray actors, one pool per policy, behind the generation protocol.

:class:`GenerationEngine` is the actor: it builds the run's generation backend for **one**
policy inside its process (``GenerationSettings.generation_backend``: ``transformers``, the trainer's
own sampler on the actor's device, what the CPU tests run; ``vllm``, a vLLM engine on the
actor's GPU, a code path that cannot run on this CPU machine) and serves
``generate(prompts, n, seeds)``. :class:`RayGenerator` implements
:class:`trainers.generation.protocol.Generator` over the pools: one call's prompts are split
over the policy's engines by prompt (a prompt's ``n`` completions stay together, so each
engine still shares the prompt's KV cache), sent at once, and gathered in order. Per-request
seeds (:class:`trainers.maths.seeding.RequestSeeds`) make each completion a function of its prompt,
its seed and the weights, so the split changes nothing.

**Weights** flow from a policy's rank-0 training worker to its engines after every update
(:meth:`RayGenerator.push`): the worker's weights go into Ray's object store once and every
engine loads them from there (full weights, the LoRA adapter, or for vLLM the merged
weights). With ``weight_sync="broadcast"`` a single-rank training group broadcasts them into
transformers engines instead (:mod:`trainers.distributed.weight_sync`, docs/scaling.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.distributed.cluster import Slot, get, import_ray, kill_all, wait_started
from trainers.distributed.config import DistributedConfig
from trainers.generation.protocol import Generation, LogprobSource, check_seeds


def policy_roles(config: TrainConfig, roles: Sequence[str], policy: str) -> list[str]:
    """The roles that policy ``policy`` plays: a :class:`~trainers.models.policy_set.PolicySet` built for
    them (each mapped to ``policy``) holds that policy alone."""
    mapping = config.policy_for_roles(roles)
    return [role for role in roles if mapping[role] == policy]


def weight_state(model: Any, policy: str, *, lora: bool, merged: bool) -> Any:
    """What an engine loads from ``model`` (policy ``policy``, its adapter active under LoRA):
    for vLLM (``merged``) the weights under the base model's names with the adapters folded in,
    else the LoRA adapter's or the full model's state dict, on the CPU."""
    if merged:
        from trainers.generation.vllm_backend import _merged_state

        return [(k, v.cpu()) for k, v in _merged_state(model)]
    if lora:
        from peft import get_peft_model_state_dict

        state = get_peft_model_state_dict(model, adapter_name=policy)
    else:
        state = model.state_dict()
    return {k: v.detach().cpu().clone() for k, v in state.items()}


def generation_config_of(model: str) -> Any:
    """The generation config ``from_pretrained`` gives ``model`` (its ``generation_config.json``,
    else one derived from its config), read without loading the weights: the stop ids of
    :func:`trainers.models.prompts.stop_token_ids` come from it."""
    from transformers import AutoConfig, GenerationConfig

    try:
        return GenerationConfig.from_pretrained(model)
    except OSError:
        return GenerationConfig.from_model_config(AutoConfig.from_pretrained(model))


class GenerationEngine:
    """The actor: the run's generation backend for one policy (module docstring)."""

    def __init__(self, config: TrainConfig, roles: list[str], policy: str) -> None:
        """Start from ``config.model.model``; the trainer pushes its weights before the first rollout
        (:meth:`RayGenerator.push`), so a resumed run's engines need no checkpoint path."""
        self.config = config
        self.policy = policy
        self.policies: Any = None
        if config.generation.generation_backend == "vllm":
            from transformers import AutoTokenizer

            from trainers.generation.vllm_backend import VLLMGenerator, engine_options
            from trainers.models.prompts import stop_token_ids

            # the trainer pushes merged full weights (weight_state), so the engine serves no adapters
            self.generator: Any = VLLMGenerator(
                config.model.model, temperature=config.model.temperature, max_new_tokens=config.model.max_new_tokens,
                stop_token_ids=stop_token_ids(AutoTokenizer.from_pretrained(config.model.model),
                                              generation_config_of(config.model.model)),
                policies=[policy], options=engine_options(config.generation, trainer_dtype=config.model.dtype,
                                                           seed=config.run.seed, lora_rank=0))
        else:
            from trainers.generation.transformers_backend import TransformersGenerator
            from trainers.models.policy_set import PolicySet

            self.policies = PolicySet(config.model, dict.fromkeys(policy_roles(config, roles, policy), policy))
            self.generator = TransformersGenerator(self.policies)

    def generate(self, prompts: list[list[int]], n: int, seeds: list[int] | None) -> list[Generation]:
        return self.generator.generate(self.policy, prompts, n, seeds=seeds)

    def load_weights(self, state: Any) -> None:
        """Take the training worker's weights (:func:`weight_state`) for the next ``generate``."""
        if self.policies is None:  # vLLM: merged (name, tensor) pairs
            self.generator.load_state(state)  # which also drops the prefix cache of the old weights
        elif self.config.model.lora:
            from peft import set_peft_model_state_dict

            set_peft_model_state_dict(self.policies.peft_model, state, adapter_name=self.policy)
        else:
            self.policies.models[self.policy].load_state_dict(state)

    def join_weight_group(self, host: str, port: int, rank: int, world_size: int, backend: str,
                          timeout_s: float) -> None:
        """Join a sender's broadcast group (:class:`~trainers.distributed.weight_sync.EngineBroadcast`)."""
        from trainers.distributed.weight_sync import open_group

        if self.policies is None:
            raise ValueError("the vLLM engine takes merged weights through the object store, not a broadcast")
        self.weight_group = open_group(host, port, rank, world_size, backend=backend, timeout_s=timeout_s)

    def receive_weights(self) -> None:
        """Overwrite this policy's weights (its adapter under LoRA) with the group's rank-0 broadcast."""
        from trainers.distributed.weight_sync import broadcast_tensors, sync_tensors

        if self.config.model.lora:
            tensors = sync_tensors(self.policies.peft_model, adapter=self.policy)
        else:
            tensors = sync_tensors(self.policies.models[self.policy])
        broadcast_tensors(self.weight_group, tensors)

    def pid(self) -> int:
        """The actor's process id (a liveness probe, :mod:`trainers.distributed.faults`)."""
        import os

        return os.getpid()


class RayGenerator:
    """:class:`~trainers.generation.protocol.Generator` over each policy's engine actors."""

    follows_updates = True

    def __init__(self, config: TrainConfig, dist: DistributedConfig, roles: Sequence[str],
                 slots: dict[str, list[Slot]], *, weight_sync: str = "object_store") -> None:
        """``weight_sync``: how :meth:`sync` ships weights, ``object_store`` or ``broadcast``
        (:mod:`~trainers.distributed.weight_sync`; the vLLM engine always takes the object store)."""
        ray = import_ray()
        self.weight_sync = weight_sync
        self.broadcasts: dict[str, Any] = {}
        self.timeout = dist.call_timeout_s
        self.logprob_source: LogprobSource = "engine" if config.generation.generation_backend == "vllm" else "exact"
        self.merged_weights = config.generation.generation_backend == "vllm"
        self.slots = slots
        self._actor = ray.remote(GenerationEngine)
        self._engine_args = (config, list(roles))
        self.engines: dict[str, list[Any]] = {name: [self._spawn(name, slot) for slot in pool]
                                              for name, pool in slots.items()}
        for name, engines in self.engines.items():
            wait_started(engines, f"the generation engines of {name!r}")

    def _spawn(self, policy: str, slot: Slot) -> Any:
        return self._actor.options(**slot.options(), max_restarts=0).remote(*self._engine_args, policy)

    def respawn(self, policy: str, index: int) -> Any:
        """Kill engine ``index`` of ``policy`` (it may be hung, not dead) and start a new one on its
        bundle, from the base model: :meth:`push` the policy's weights before it generates."""
        kill_all([self.engines[policy][index]])
        self.broadcasts.pop(policy, None)  # the new engine is in no group: the next sync builds one
        self.engines[policy][index] = self._spawn(policy, self.slots[policy][index])
        wait_started([self.engines[policy][index]], f"generation engine {index} of {policy!r}")
        return self.engines[policy][index]

    def generate(self, policy: str, prompts: Sequence[Sequence[int]], n: int, *,
                 seeds: Sequence[int] | None = None) -> list[Generation]:
        check_seeds(prompts, n, seeds)
        if not prompts:
            return []
        engines = self.engines[policy]
        count = min(len(engines), len(prompts))
        bounds = [len(prompts) * k // count for k in range(count + 1)]
        refs = [engines[k].generate.remote([list(p) for p in prompts[bounds[k]:bounds[k + 1]]], n,
                                           None if seeds is None else list(seeds[bounds[k] * n:bounds[k + 1] * n]))
                for k in range(count) if bounds[k + 1] > bounds[k]]
        parts = get(refs, self.timeout, f"the generation engines of {policy!r}")
        return [generation for part in parts for generation in part]

    def push(self, policy: str, state_ref: Any) -> None:
        """Every engine of ``policy`` loads the weights in ``state_ref`` (an object-store
        reference to :func:`weight_state` output) before its next call."""
        get([engine.load_weights.remote(state_ref) for engine in self.engines[policy]], self.timeout,
            f"the generation engines of {policy!r} (loading weights)")

    def broadcasts_from(self, policy: str, workers: Sequence[Any]) -> bool:
        """Broadcast the weights of ``policy``'s training group ``workers`` to its engines and say
        True, when ``weight_sync`` is ``broadcast``, the engines are transformers ones and the
        group has one rank (a multi-rank group's full weights exist only after a gather); else False."""
        if self.weight_sync != "broadcast" or self.merged_weights or len(workers) != 1:
            return False
        from trainers.distributed.weight_sync import EngineBroadcast

        if policy not in self.broadcasts:
            self.broadcasts[policy] = EngineBroadcast(self.engines[policy], worker=workers[0], timeout_s=self.timeout)
        self.broadcasts[policy].send()
        return True

    def sync(self, policy: str, model: Any) -> None:
        """Push the weights of an in-process ``model`` (the distributed trainer pushes its rank-0
        training worker's weights with :meth:`push` instead, without passing through here)."""
        ray = import_ray()
        lora = hasattr(model, "peft_config")
        if self.weight_sync == "broadcast" and not self.merged_weights:
            from trainers.distributed.weight_sync import EngineBroadcast, sync_tensors

            if policy not in self.broadcasts:
                self.broadcasts[policy] = EngineBroadcast(self.engines[policy], timeout_s=self.timeout)
            self.broadcasts[policy].send(sync_tensors(model, adapter=policy if lora else None))
            return
        self.push(policy, ray.put(weight_state(model, policy, lora=lora, merged=self.merged_weights)))

    def close(self) -> None:
        kill_all(engine for engines in self.engines.values() for engine in engines)
        self.engines = {}
        self.broadcasts = {}
