"""What the vLLM engine's worker process does for a weight sync: :class:`WeightSync`.

vLLM mixes this class into its worker (``worker_extension_cls``), so the trainer calls
:meth:`WeightSync.load_synced_weights` by name through ``LLM.collective_rpc`` with a path, the
only thing that crosses into the engine's process intact (see :mod:`trainers.generation.vllm_weights`).

Why more than vLLM's ``reload_weights(weights_path=...)``: the reload replaces every loaded
layer's tensors, and a layer tied to another one (the output head of a model with
``tie_word_embeddings``, such as SmolLM2, Llama 3.2 1B/3B, Qwen2.5 0.5-3B) is skipped by the
checkpoint loader and keeps its old tensors: the engine would then score every token with the
old output head while the trainer's tied head has moved. The ties are read from the model before
its first reload (two modules holding one ``weight`` parameter; the first in module order is the
one the checkpoint loads) and restored after each one, with the tied layer's weights processed
again as vLLM does after loading (on CPU: the packed GEMM weights).

This module is imported inside vLLM's worker process; it imports nothing of vLLM.
"""

from __future__ import annotations

from typing import Any

import torch


def tied_weights(model: torch.nn.Module) -> list[tuple[str, str]]:
    """``(source, tied)`` module names whose ``weight`` is one parameter; ``source`` comes first in module order."""
    owner: dict[int, str] = {}
    ties = []
    for name, module in model.named_modules():
        weight = module._parameters.get("weight")
        if weight is None:
            continue
        if id(weight) in owner:
            ties.append((owner[id(weight)], name))
        else:
            owner[id(weight)] = name
    return ties


class WeightSync:
    """Methods of the vLLM worker (``worker_extension_cls``) that the generator calls by name."""

    model_runner: Any
    reload_weights: Any

    def load_synced_weights(self, weights_path: str) -> None:
        """Reload the model in place from the safetensors under ``weights_path``, ties kept."""
        model = self.model_runner.get_model()
        if not hasattr(self, "_pettingllm_ties"):  # read while the ties still hold: before the first reload
            self._pettingllm_ties = tied_weights(model)
        self.reload_weights(weights_path=weights_path)
        for source_name, tied_name in self._pettingllm_ties:
            source, tied = model.get_submodule(source_name), model.get_submodule(tied_name)
            tied.weight = source.weight
            quant_method = getattr(tied, "quant_method", None)
            if quant_method is not None:
                quant_method.process_weights_after_loading(tied)
