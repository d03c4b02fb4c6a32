"""LLM policies: Hugging Face causal LMs, one shared or one per role (full copies or LoRA adapters).

A :class:`PolicySet` owns the trainable policies (by name), their optimisers and the frozen
reference used by the KL term, built from a :class:`~trainers.models.spec.ModelSpec` and a
role -> policy-name map. With ``lora`` every name is one PEFT adapter on a single frozen base
model, otherwise every name is a full model. It is also the policies' :class:`PromptEncoder`
(tokenizer, chat encoding, stop ids: :mod:`trainers.models.prompts`) and scores completions
(:meth:`PolicySet.token_logprobs`, :mod:`trainers.models.scoring`). Sampling is a generation
backend's: the in-process sampler is :mod:`trainers.generation.transformers_backend`. Models stay
in ``eval()`` mode: dropout would make the recorded and recomputed log-probs of the same tokens
disagree.

Precision (``ModelSpec.dtype`` is the *compute* dtype): trained weights and the AdamW
state stay float32 ("master weights"), and forwards run under ``torch.autocast`` when the
compute dtype is lower. A bfloat16 weight near 0.02 has a spacing of ~1e-4, so storing the
trained weights in bfloat16 silently drops most updates of a fine-tuning learning rate
(lr 1e-6 moves a weight by ~1e-6 per Adam step). Inside one autocast region torch casts
each float32 weight once and caches the copy, so a generation call works from a transient
bfloat16 copy of the weights (speed) while the stored parameters stay float32. Frozen weights (the
LoRA base model, the KL reference) are stored in the compute dtype: they never take an update.
With a float32 compute dtype nothing is cast and no autocast region is entered.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import torch

from trainers.models.prompts import PromptEncoder
from trainers.models.scoring import autocast_region, token_logprobs
from trainers.models.spec import ModelSpec, ModelSpecError


def resolve_device(name: str) -> torch.device:
    """``auto`` picks cuda when available. A CUDA device that is not there is a
    :class:`~trainers.models.spec.ModelSpecError` (one line), not torch's assertion deep in a model load."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        reason = "this torch build has no CUDA" if torch.version.cuda is None else "no CUDA GPU is visible"
        raise ModelSpecError(f"config field 'device': got {name!r}, but {reason}; allowed here: cpu or auto")
    return torch.device(name)


def describe_policies(spec: ModelSpec, role_to_policy: Mapping[str, str]) -> str:
    """One line for logs: which role trains which policy, and how."""
    kind = f"LoRA r={spec.lora_r} adapters on one base" if spec.lora else "full models"
    return f"{len(set(role_to_policy.values()))} policies ({kind}): " + json.dumps(dict(role_to_policy))


def adamw(params: Sequence[torch.nn.Parameter], spec: ModelSpec, device: torch.device) -> torch.optim.AdamW:
    """The optimiser of every policy, in one process or data-parallel (so that their checkpoints'
    optimiser states are alike). torch's fused AdamW (one kernel over all parameters) runs on CPU
    and CUDA: on a 2 M-parameter model on one CPU core it takes 5 ms where the per-tensor
    (foreach) one takes 23."""
    fused = True if device.type in ("cpu", "cuda") else None
    return torch.optim.AdamW(params, lr=spec.lr, weight_decay=spec.weight_decay, fused=fused)


class PolicySet(PromptEncoder):
    """The trainable policies of a run, their optimisers and the KL reference (module docstring)."""

    def __init__(self, spec: ModelSpec, role_to_policy: Mapping[str, str], *,
                 init_dir: str | Path | None = None, reference: bool = False) -> None:
        """Load ``spec.model`` once per policy name of ``role_to_policy`` (role -> policy name;
        roles with the same name share a policy); with ``init_dir`` (a checkpoint's ``policies/``)
        start from its weights. ``reference``: keep the frozen initial policy for a KL term (under
        full fine-tuning a frozen copy of ``spec.model``; under LoRA the base with its adapters off
        is the reference anyway)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.spec = spec
        self.role_to_policy = dict(role_to_policy)
        self.names = sorted(set(self.role_to_policy.values()))
        self.device = resolve_device(spec.device)
        self.compute_dtype: torch.dtype = getattr(torch, spec.dtype)
        tokenizer = AutoTokenizer.from_pretrained(spec.model)

        def load(path: str | Path, *, frozen: bool, backpropagated: bool) -> torch.nn.Module:
            # trained weights are float32 master weights; frozen ones are stored in the compute dtype
            dtype = self.compute_dtype if frozen else torch.float32
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(self.device)
            if spec.gradient_checkpointing and backpropagated:
                # (transformers 5.x renamed it activation_checkpointing_enable, deprecating the old name)
                kwargs = {"use_reentrant": False}
                if hasattr(model, "activation_checkpointing_enable"):
                    model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
                else:
                    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
            return model.eval()

        self.models: dict[str, torch.nn.Module] = {}
        self.reference: torch.nn.Module | None = None
        if spec.lora:
            from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
            from safetensors.torch import load_file

            targets: str | list[str] = spec.lora_target_modules
            if targets != "all-linear":
                targets = [t.strip() for t in targets.split(",") if t.strip()]
            lora_config = LoraConfig(r=spec.lora_r, lora_alpha=spec.lora_alpha, lora_dropout=0.0,
                                     target_modules=targets, task_type="CAUSAL_LM")
            # the base is frozen, but the adapters' gradients flow through its layers
            base = load(spec.model, frozen=True, backpropagated=True)
            generation_config = base.generation_config
            peft_model = get_peft_model(base, lora_config, adapter_name=self.names[0])
            for name in self.names[1:]:
                peft_model.add_adapter(name, lora_config)
            if init_dir is not None:
                for name in self.names:
                    weights = load_file(str(Path(init_dir) / name / "adapter_model.safetensors"))
                    set_peft_model_state_dict(peft_model, weights, adapter_name=name)
            self.peft_model = peft_model.eval()
            self._params = {name: self._adapter_parameters(name) for name in self.names}
        else:
            for name in self.names:
                path = Path(init_dir) / name if init_dir is not None else spec.model
                self.models[name] = load(path, frozen=False, backpropagated=True)
            generation_config = self.models[self.names[0]].generation_config
            self._params = {name: list(m.parameters()) for name, m in self.models.items()}
            if reference:
                self.reference = load(spec.model, frozen=True, backpropagated=False).requires_grad_(False)
        super().__init__(tokenizer, generation_config, spec.max_prompt_tokens)
        for params in self._params.values():
            for p in params:
                # PEFT keeps adapters of a low-precision base in float32 already; make it a guarantee
                p.data = p.data.float()
                p.requires_grad_(True)
        self.optimizers = {name: adamw(params, spec, self.device) for name, params in self._params.items()}

    # ------------------------------------------------------------ structure
    def autocast(self) -> AbstractContextManager[Any]:
        """The compute-dtype region for forwards (:func:`trainers.models.scoring.autocast_region`)."""
        return autocast_region(self.device, self.compute_dtype)

    def _adapter_parameters(self, name: str) -> list[torch.nn.Parameter]:
        params = [p for n, p in self.peft_model.named_parameters() if f".{name}." in n]
        if not params:
            raise ValueError(f"no LoRA parameters found for adapter {name!r}")
        return params

    def parameters(self, name: str) -> list[torch.nn.Parameter]:
        """The trainable parameters of policy ``name`` (and nothing else)."""
        return self._params[name]

    @contextmanager
    def active(self, name: str) -> Iterator[torch.nn.Module]:
        """The module that computes policy ``name`` (activates its adapter under LoRA)."""
        if self.spec.lora:
            self.peft_model.set_adapter(name)
            # PEFT's set_adapter freezes the other adapters; keep every policy trainable.
            for params in self._params.values():
                for p in params:
                    p.requires_grad_(True)
            yield self.peft_model
        else:
            yield self.models[name]

    @contextmanager
    def reference_model(self, name: str) -> Iterator[torch.nn.Module]:
        """The frozen initial policy: the base model with adapters disabled under LoRA."""
        if self.spec.lora:
            with self.active(name) as model, model.disable_adapter():
                yield model
        elif self.reference is None:
            raise RuntimeError("no reference model was loaded (the spec asks for none: kl_coef is 0)")
        else:
            yield self.reference

    # ------------------------------------------------------------- scoring
    def token_logprobs(
        self, model: torch.nn.Module, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs ``[B, C]`` (float32; 0 at padding) of the completion tokens under ``model``
        (one of :meth:`active` or :meth:`reference_model`) at the sampling temperature, and their
        mask (:func:`trainers.models.scoring.token_logprobs`); differentiable unless under ``no_grad``."""
        return token_logprobs(model, prompts, completions, pad_id=self.pad_id, device=self.device,
                              compute_dtype=self.compute_dtype, temperature=self.spec.temperature,
                              chunk_size=self.spec.logprob_chunk_size, checkpointed=self.spec.gradient_checkpointing,
                              shared_prefix=self.spec.shared_prefix)

    # ----------------------------------------------------------- checkpoints
    def save(self, directory: Path) -> None:
        """Write every policy to ``directory/<name>/`` in a format ``from_pretrained`` loads
        (a full model, or a PEFT adapter directory)."""
        for name in self.names:
            target = directory / name
            if self.spec.lora:
                from peft import get_peft_model_state_dict
                from safetensors.torch import save_file

                target.mkdir(parents=True, exist_ok=True)
                weights = get_peft_model_state_dict(self.peft_model, adapter_name=name)
                save_file({k: v.detach().cpu().contiguous() for k, v in weights.items()},
                          str(target / "adapter_model.safetensors"))
                self.peft_model.peft_config[name].save_pretrained(str(target))
            else:
                self.models[name].save_pretrained(target)
                self.tokenizer.save_pretrained(target)

    def optimizer_state(self) -> dict[str, Any]:
        return {name: opt.state_dict() for name, opt in self.optimizers.items()}

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        for name, opt in self.optimizers.items():
            opt.load_state_dict(state[name])

    def describe(self) -> str:
        """One line for logs: which role trains which policy, and how (:func:`describe_policies`)."""
        return describe_policies(self.spec, self.role_to_policy)

    def snapshot(self, name: str) -> dict[str, torch.Tensor]:
        """A detached copy of policy ``name``'s trainable parameters (tests, diagnostics)."""
        return {str(i): p.detach().clone() for i, p in enumerate(self._params[name])}

