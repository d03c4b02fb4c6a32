"""Generation with vLLM on a GPU, with the trainer's weights pushed after every update.

vLLM runs in the trainer's process (colocated, as TRL's ``vllm_mode="colocate"``), so a
weight sync is a copy of tensors already on the GPU rather than a transfer between
processes. The engine samples; the trainer keeps the model it optimises. After each
optimizer step :meth:`VLLMGenerator.sync_weights` loads the trainer model's current
weights (LoRA adapters merged) into the engine, so the next rollout is on-policy.

vLLM computes log-probabilities with its own kernels, which differ from the trainer's in
the last bits (and, depending on the version, before temperature scaling), so the
trainer recomputes the "old" log-probs with its own model when this backend is used.

Needs ``pip install vllm`` and a CUDA GPU; :func:`vllm_available` says whether both are
here. Nothing else in the project imports vLLM.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from trainers.policy import Generation


def vllm_available() -> bool:
    """True when vLLM is installed and a CUDA device is visible."""
    return importlib.util.find_spec("vllm") is not None and torch.cuda.is_available()


class VLLMGenerator:
    """Samples ``n`` completions per prompt with vLLM; same output as ``PolicySet.generate``."""

    def __init__(
        self,
        model_path: str,
        *,
        temperature: float,
        max_new_tokens: int,
        seed: int = 0,
        gpu_memory_utilization: float = 0.3,
        dtype: str = "bfloat16",
    ) -> None:
        if not vllm_available():
            raise RuntimeError("the vLLM backend needs `pip install vllm` and a CUDA GPU")
        from vllm import LLM, SamplingParams

        self._sampling_params = SamplingParams
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.calls = 0
        self.llm = LLM(model=model_path, dtype=dtype, seed=seed, gpu_memory_utilization=gpu_memory_utilization,
                       enable_prefix_caching=True)

    def generate(self, prompts: Sequence[Sequence[int]], n: int) -> list[Generation]:
        """``n`` completions of every prompt in one engine call (prompt-major order, like
        ``PolicySet.generate``); log-probs are the engine's, see the module docstring."""
        self.calls += 1
        params = self._sampling_params(n=n, temperature=self.temperature, max_tokens=self.max_new_tokens,
                                       logprobs=0, seed=self.seed + self.calls)
        outputs = self.llm.generate([{"prompt_token_ids": list(p)} for p in prompts], params, use_tqdm=False)
        generations = []
        for prompt, output in zip(prompts, outputs, strict=True):
            for completion in output.outputs:
                ids = list(completion.token_ids)
                steps = completion.logprobs or []
                logprobs = [float(step[token].logprob) for step, token in zip(steps, ids, strict=False)]
                generations.append(Generation(list(prompt), ids, logprobs, completion.text))
        return generations

    def _engine_model(self) -> Any:
        """The ``nn.Module`` inside the engine (its location moved between vLLM versions)."""
        executor = self.llm.llm_engine.model_executor
        worker = executor.driver_worker
        worker = getattr(worker, "worker", worker)
        return worker.model_runner.model

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Load ``model``'s current weights into the engine (PEFT adapters merged first)."""
        self.load_state(_merged_state(model))
        self.llm.reset_prefix_cache()  # cached prefixes were computed with the old weights

    def load_state(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        self._engine_model().load_weights(weights=weights)


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
