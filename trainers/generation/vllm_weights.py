"""The trainer's weights as files a vLLM engine loads: a full state dict, or one LoRA adapter.

vLLM runs its engine in its own process by default (the fast mode: scheduling and sampling
overlap the model's forward), where the engine's model is not reachable from the trainer, and
tensors passed through ``LLM.collective_rpc`` arrive as nested lists. Only a small message
crosses the process boundary: the path of what this module wrote. A full fine-tuning update
is written as one ``model.safetensors`` that the engine reloads in place
(:meth:`trainers.generation.vllm_worker.WeightSync.load_synced_weights`);
a LoRA update as a PEFT adapter directory that the engine serves under a new adapter id.

Every file is written under a temporary name and renamed into place, so an engine never reads
a half-written file, and a directory is complete before anything names it. Weights are cast to
the engine's dtype before writing (bfloat16 halves the bytes); tensors that share storage
(tied embeddings) are written once, as ``save_pretrained`` does, and vLLM ties them again.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

#: The file a full state dict is written to (the name vLLM's safetensors loader looks for).
STATE_FILE = "model.safetensors"


def write_state(weights: Iterable[tuple[str, torch.Tensor]], directory: Path, dtype: torch.dtype) -> Path:
    """Write ``weights`` (name, tensor) to ``directory/model.safetensors`` in ``dtype``, atomically
    (temporary name, then rename); floating-point tensors only are cast. Returns the directory."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    state: dict[str, torch.Tensor] = {}
    written: set[int] = set()
    for name, tensor in weights:
        storage = tensor.untyped_storage().data_ptr()
        if storage in written:  # a tied weight: the engine ties it again
            continue
        written.add(storage)
        value = tensor.detach().to("cpu")
        state[name] = (value.to(dtype) if value.is_floating_point() else value).contiguous()
    partial = directory / f".{STATE_FILE}.partial"
    save_file(state, str(partial))
    os.replace(partial, directory / STATE_FILE)
    return directory


def write_adapter(model: Any, adapter: str, directory: Path) -> Path:
    """Write PEFT adapter ``adapter`` of ``model`` (its config and weights, as ``save_pretrained``
    lays them out) to the new directory ``directory``: built in a temporary sibling, then renamed."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        weights = get_peft_model_state_dict(model, adapter_name=adapter)
        save_file({k: v.detach().to("cpu").contiguous() for k, v in weights.items()},
                  str(staging / "adapter_model.safetensors"))
        model.peft_config[adapter].save_pretrained(str(staging))
        os.replace(staging, directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory
