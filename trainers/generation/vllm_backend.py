"""Generation with vLLM on a GPU, with the trainer's weights pushed after every update.

vLLM runs in the trainer's process (colocated, as TRL's ``vllm_mode="colocate"``), so a
weight sync is a copy of tensors already on the GPU rather than a transfer between
processes. The engine samples; the trainer keeps the model it optimises. After each
optimizer step :meth:`VLLMGenerator.sync` loads the trainer model's current weights (LoRA
adapters merged) into the engine, so the next rollout is on-policy. It implements
:class:`trainers.generation.protocol.Generator` for one policy (the shared regime: one engine).

vLLM computes log-probabilities with its own kernels, which differ from the trainer's (in
the last bits, more in another precision), so the trainer recomputes the "old" log-probs
with its own model and, by default, corrects for the gap with truncated importance sampling
(:mod:`trainers.maths.importance_sampling`); the engine is asked for log-probs after temperature
scaling (``logprobs_mode="processed_logprobs"`` where the vLLM version has it), the
distribution the tokens were drawn from.

Seeds: every (call, prompt, sample) is its own request with its own seed
(:class:`trainers.maths.seeding.RequestSeeds`), so no two branches or calls share a random stream
and a resumed run draws exactly what an uninterrupted one would. Generation stops on every
id in ``stop_token_ids`` (the union of the tokenizer's eos and the generation config's eos
ids that the trainer's :class:`~trainers.models.policy_set.PolicySet` stops on), so every backend ends a
completion at the same tokens.

Prompts reach the engine as token ids (``prompt_token_ids``, from
:meth:`trainers.models.policy_set.PolicySet.encode_prompt`), never as text that vLLM would tokenize
itself, parsing special-token strings inside messages (:mod:`trainers.models.chat_tokens`).

LoRA: a checkpoint of a LoRA run holds adapters only, which vLLM cannot load as a model, so
the engine starts from the base model and the trainer pushes the merged weights before the
first rollout (:func:`engine_init_path`).

Needs ``pip install vllm`` and a CUDA GPU; :func:`vllm_available` says whether both are
here. Nothing else in the project imports vLLM.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from trainers.generation.backends import BACKENDS
from trainers.generation.protocol import BackendUnavailable, Generation, LogprobSource, check_seeds

if TYPE_CHECKING:
    from trainers.algorithms.atgrpo.config import TrainConfig
    from trainers.models.policy_set import PolicySet


def vllm_available() -> bool:
    """True when vLLM is installed and a CUDA device is visible."""
    return importlib.util.find_spec("vllm") is not None and torch.cuda.is_available()


def engine_init_path(model: str, checkpoint: Path | None, *, lora: bool) -> str:
    """The directory the engine loads at start: the shared policy of a full fine-tuning
    checkpoint (a complete model), else the base ``model``. Under LoRA a checkpoint's policy
    directory holds adapters only, so the engine loads the base and the trainer then pushes
    the merged weights (:func:`needs_initial_sync`)."""
    if checkpoint is None or lora:
        return model
    return str(checkpoint / "policies" / "shared")


def needs_initial_sync(checkpoint: Path | None, *, lora: bool) -> bool:
    """True when the engine's initial weights are not the trainer's: a resumed LoRA run."""
    return checkpoint is not None and lora


def sampling_requests(
    prompts: Sequence[Sequence[int]], n: int, seeds: Sequence[int] | None
) -> list[tuple[list[int], int | None]]:
    """One ``(prompt ids, seed)`` request per completion, prompt-major (prompt 0's ``n`` first),
    the protocol's order; ``seeds`` has one seed per request (None: the engine's own stream)."""
    check_seeds(prompts, n, seeds)
    return [(list(prompt), None if seeds is None else seeds[p * n + i])
            for p, prompt in enumerate(prompts) for i in range(n)]


def sampling_kwargs(*, temperature: float, max_new_tokens: int, stop_token_ids: Sequence[int],
                    seed: int | None) -> dict[str, Any]:
    """``SamplingParams`` of one request: one completion, its own seed, the sampled token's
    log-prob, and a stop on every end-of-turn id."""
    return {"n": 1, "temperature": temperature, "max_tokens": max_new_tokens, "logprobs": 0, "seed": seed,
            "stop_token_ids": sorted(set(stop_token_ids))}


def _engine_arguments() -> set[str]:
    from vllm.engine.arg_utils import EngineArgs

    return {f.name for f in dataclasses.fields(EngineArgs)}


class VLLMGenerator:
    """Samples ``n`` completions per prompt with vLLM; the protocol's shapes (see the module docstring)."""

    follows_updates = BACKENDS["vllm"].follows_updates
    logprob_source: LogprobSource = BACKENDS["vllm"].logprob_source

    def __init__(
        self,
        model_path: str,
        *,
        temperature: float,
        max_new_tokens: int,
        stop_token_ids: Sequence[int],
        seed: int = 0,
        gpu_memory_utilization: float = 0.3,
        dtype: str = "bfloat16",
        policy: str = "shared",
    ) -> None:
        if importlib.util.find_spec("vllm") is None:
            raise BackendUnavailable("generation_backend='vllm' needs vLLM: pip install vllm (and a CUDA GPU)")
        if not torch.cuda.is_available():
            raise BackendUnavailable("generation_backend='vllm' needs a CUDA GPU; none is visible "
                                     "(use generation_backend='transformers')")
        from vllm import LLM, SamplingParams

        self.policy = policy

        self._sampling_params = SamplingParams
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self.stop_token_ids = list(stop_token_ids)
        extra: dict[str, Any] = {}
        if "logprobs_mode" in _engine_arguments():  # vLLM >= 0.10.2; older engines return processed log-probs
            extra["logprobs_mode"] = "processed_logprobs"
        self.llm: Any = LLM(model=model_path, dtype=dtype, seed=seed, gpu_memory_utilization=gpu_memory_utilization,
                            enable_prefix_caching=True, **extra)

    @classmethod
    def from_config(cls, config: TrainConfig, policies: PolicySet, *, checkpoint: Path | None = None) -> VLLMGenerator:
        """The engine for the run's one policy, loaded from the checkpoint a resumed run starts
        from (:func:`engine_init_path`), with the checkpoint's merged adapters pushed under LoRA."""
        (policy,) = policies.names  # TrainConfig.validate allows the shared regime only
        generator = cls(engine_init_path(config.model, checkpoint, lora=config.lora),
                        temperature=config.temperature, max_new_tokens=config.max_new_tokens,
                        stop_token_ids=policies.eos_ids, seed=config.seed, dtype=config.dtype,
                        gpu_memory_utilization=config.vllm_gpu_memory_utilization, policy=policy)
        if needs_initial_sync(checkpoint, lora=config.lora):
            with policies.active(policy) as model:
                generator.sync(policy, model)  # the checkpoint's adapters, merged into the base
        return generator

    def _check_policy(self, policy: str) -> None:
        if policy != self.policy:
            raise ValueError(f"this vLLM engine serves policy {self.policy!r}, not {policy!r} (one engine per run)")

    def generate(self, policy: str, prompts: Sequence[Sequence[int]], n: int, *,
                 seeds: Sequence[int] | None = None) -> list[Generation]:
        """``n`` completions of every prompt in one engine call (prompt-major order), each its
        own request with its seed from ``seeds`` (:func:`sampling_requests`; the prefix cache
        still computes a shared prompt once). Log-probs are the engine's, see the module docstring."""
        self._check_policy(policy)
        requests = sampling_requests(prompts, n, seeds)
        params = [self._sampling_params(**sampling_kwargs(
            temperature=self.temperature, max_new_tokens=self.max_new_tokens, stop_token_ids=self.stop_token_ids,
            seed=seed)) for _, seed in requests]
        outputs = self.llm.generate([{"prompt_token_ids": ids} for ids, _ in requests], params, use_tqdm=False)
        generations = []
        for (prompt, _), output in zip(requests, outputs, strict=True):
            (completion,) = output.outputs
            ids = list(completion.token_ids)
            steps = completion.logprobs or []
            if len(steps) != len(ids):
                raise RuntimeError(f"vLLM returned {len(steps)} log-probs for {len(ids)} tokens")
            logprobs = [float(step[token].logprob) for step, token in zip(steps, ids, strict=True)]
            generations.append(Generation(prompt, ids, logprobs, completion.text))
        return generations

    def _engine_model(self) -> Any:
        """The ``nn.Module`` inside the engine (its location moved between vLLM versions)."""
        executor = self.llm.llm_engine.model_executor
        worker = executor.driver_worker
        worker = getattr(worker, "worker", worker)
        return worker.model_runner.model

    def sync(self, policy: str, model: torch.nn.Module) -> None:
        """Load ``model``'s current weights into the engine (PEFT adapters merged first)."""
        self._check_policy(policy)
        self.load_state(_merged_state(model))
        self.llm.reset_prefix_cache()  # cached prefixes were computed with the old weights

    def load_state(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        self._engine_model().load_weights(weights=weights)

    def close(self) -> None:
        """Drop the engine and give its GPU memory back."""
        if self.llm is not None:
            self.llm = None
            torch.cuda.empty_cache()


def _merged_state(model: torch.nn.Module) -> Iterable[tuple[str, torch.Tensor]]:
    """Weights under the base model's parameter names; LoRA deltas folded in."""
    if hasattr(model, "merge_adapter") and hasattr(model, "unmerge_adapter"):
        model.merge_adapter()
        try:
            state = {
                name.replace("base_model.model.", "", 1).replace(".base_layer", ""): tensor.detach().clone()
                for name, tensor in model.state_dict().items()
                if "lora_" not in name
            }
        finally:
            model.unmerge_adapter()
        return state.items()
    return ((name, tensor.detach()) for name, tensor in model.state_dict().items())
