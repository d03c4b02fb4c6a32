"""LLM policies: Hugging Face causal LMs, one shared or one per role (full copies or LoRA adapters).

A :class:`PolicySet` owns the tokenizer, the trainable policies (by name), their optimisers
and the frozen reference used by the KL term. Roles map to policy names
(``TrainConfig.policy_for_roles``); with ``lora`` every name is one PEFT adapter on a single
frozen base model, otherwise every name is a full model.

Generation is a plain batched sampling loop with a KV cache, written out instead of
``model.generate`` so that (a) the log-probability of every sampled token is recorded at
generation time under exactly the distribution it was drawn from (temperature-scaled
softmax; no hidden top-k/top-p from a generation config), and (b) the torch RNG stream,
and therefore ``--resume``, is under our control. Models stay in ``eval()`` mode: dropout
would make the recorded and recomputed log-probs of the same tokens disagree.

Where the time goes and what is done about it (``benchmarks/trainer_step.py``): a GRPO
group is ``n`` completions of one prompt, so both sampling and scoring run each *distinct*
prompt through the model once and expand its KV cache to the ``n`` rows
(:meth:`PolicySet._encode_prompts`); scoring then runs only the completion tokens, and only
they reach the LM head. During sampling the cache grows in place instead of by
concatenation, a token costs one uniform draw per row, and nothing leaves the device until
the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers.modeling_outputs import CausalLMOutputWithPast

try:  # transformers >= 4.54 keeps one object per layer in its caches
    from transformers.cache_utils import DynamicLayer
except ImportError:  # older caches are lists of tensors: reserve_cache leaves them alone
    DynamicLayer = object

from trainers.config import TrainConfig

# transformers 5 renamed the KV-cache argument and output field from ``past_key_values`` to ``cache``.
_CACHE = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


@dataclass
class Generation:
    """One sampled completion."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    """Log-probability of each completion token when it was sampled (PPO's "old" policy)."""
    text: str


def resolve_device(name: str) -> torch.device:
    """``auto`` picks cuda when available."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[list[list[int]], list[list[int]]]:
    """Left-pad token rows to one length; returns ids and the attention mask."""
    width = max(len(r) for r in rows)
    ids = [[pad_id] * (width - len(r)) + list(r) for r in rows]
    mask = [[0] * (width - len(r)) + [1] * len(r) for r in rows]
    return ids, mask


def positions_from_mask(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that ignore left padding, so a padded prompt is encoded like an unpadded one."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def sample_categorical(probs: torch.Tensor) -> torch.Tensor:
    """One token per row of ``probs`` ``[B, V]`` by inverse-CDF sampling: a single uniform
    draw per row and a binary search in the cumulative distribution.

    An exact draw from the categorical distribution, like ``torch.multinomial(probs, 1)``,
    which on CPU draws one exponential variate per vocabulary entry (``B x V`` random numbers
    per token). Zero-probability entries are never picked: ``searchsorted(right=True)``
    returns the first index whose cumulative mass exceeds the draw, and a zero entry does
    not add mass."""
    cdf = probs.cumsum(dim=-1)
    draw = torch.rand(probs.shape[0], 1, device=probs.device, dtype=cdf.dtype) * cdf[:, -1:]
    return torch.searchsorted(cdf, draw, right=True).squeeze(1).clamp(max=probs.shape[1] - 1)


class _GrowInPlaceLayer(DynamicLayer):
    """A transformers ``DynamicLayer`` whose keys and values live in a buffer with room for
    ``extra`` more tokens. ``DynamicLayer.update`` appends with ``torch.cat``, copying the
    whole cache for every new token (quadratic in the completion length); here appending
    copies only the new token. ``keys``/``values`` are views of the filled part, so the rest
    of transformers sees an ordinary dynamic layer."""

    def __init__(self, layer: DynamicLayer, extra: int) -> None:
        super().__init__()
        self.device, self.is_initialized = layer.keys.device, True
        self._keys = self._reserve(layer.keys, extra)
        self._values = self._reserve(layer.values, extra)
        length = layer.keys.shape[-2]
        self.keys, self.values = self._keys[..., :length, :], self._values[..., :length, :]

    @staticmethod
    def _reserve(tensor: torch.Tensor, extra: int) -> torch.Tensor:
        shape = list(tensor.shape)
        shape[-2] += extra
        buffer = tensor.new_empty(shape)
        buffer[..., :tensor.shape[-2], :] = tensor
        return buffer

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
               ) -> tuple[torch.Tensor, torch.Tensor]:
        start = self.keys.shape[-2]
        end = start + key_states.shape[-2]
        if end > self._keys.shape[-2]:  # out of room: fall back to concatenation
            return super().update(key_states, value_states, *args, **kwargs)
        self._keys[..., start:end, :] = key_states
        self._values[..., start:end, :] = value_states
        self.keys, self.values = self._keys[..., :end, :], self._values[..., :end, :]
        return self.keys, self.values


def reserve_cache(cache: Any, extra: int) -> None:
    """Give every plain dynamic layer of ``cache`` room for ``extra`` more tokens (other layer
    types, e.g. sliding-window ones, are left as they are)."""
    layers = getattr(cache, "layers", None)
    for i, layer in enumerate(layers or []):
        if type(layer) is DynamicLayer and layer.is_initialized:
            layers[i] = _GrowInPlaceLayer(layer, extra)


class PolicySet:
    """The trainable policies of a run, their optimisers and the KL reference."""

    def __init__(self, config: TrainConfig, roles: Sequence[str], *, init_dir: str | Path | None = None) -> None:
        """Load ``config.model``; with ``init_dir`` (a checkpoint's ``policies/``) start from its weights."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config = config
        self.role_to_policy = config.policy_for_roles(roles)
        self.names = sorted(set(self.role_to_policy.values()))
        self.device = resolve_device(config.device)
        self.dtype = getattr(torch, config.dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(config.model)
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.tokenizer.eos_token_id)
        self.eos_ids = self._eos_ids()

        def load(path: str | Path) -> torch.nn.Module:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype).to(self.device)
            return model.eval()

        self.models: dict[str, torch.nn.Module] = {}
        self.reference: torch.nn.Module | None = None
        if config.lora:
            from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
            from safetensors.torch import load_file

            targets: str | list[str] = config.lora_target_modules
            if targets != "all-linear":
                targets = [t.strip() for t in targets.split(",") if t.strip()]
            lora_config = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=0.0,
                                     target_modules=targets, task_type="CAUSAL_LM")
            peft_model = get_peft_model(load(config.model), lora_config, adapter_name=self.names[0])
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
                self.models[name] = load(Path(init_dir) / name if init_dir is not None else config.model)
            self._params = {name: list(m.parameters()) for name, m in self.models.items()}
            if config.kl_coef > 0:
                self.reference = load(config.model).requires_grad_(False)
        for params in self._params.values():
            for p in params:
                p.requires_grad_(True)
        self.optimizers = {
            name: torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
            for name, params in self._params.items()
        }

    # ------------------------------------------------------------ structure
    def _eos_ids(self) -> list[int]:
        ids = {int(self.tokenizer.eos_token_id)} if self.tokenizer.eos_token_id is not None else set()
        if not ids:
            raise ValueError("the tokenizer has no eos token; completions could never end")
        return sorted(ids)

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
        if self.config.lora:
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
        if self.config.lora:
            with self.active(name) as model, model.disable_adapter():
                yield model
        elif self.reference is None:
            raise RuntimeError("no reference model was loaded (kl_coef is 0)")
        else:
            yield self.reference

    # -------------------------------------------------------------- prompts
    def encode_prompt(self, messages: Sequence[dict[str, str]]) -> tuple[str, list[int]]:
        """Chat-template the messages (with the generation prompt); keep the last
        ``max_prompt_tokens`` tokens."""
        if self.tokenizer.chat_template:
            text = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
        else:  # base models without a template: a plain transcript
            text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return text, list(ids[-self.config.max_prompt_tokens:])

    # ----------------------------------------------------------- generation
    def _encode_prompts(
        self, model: torch.nn.Module, prompts: Sequence[Sequence[int]]
    ) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run every *distinct* prompt through ``model`` once and expand the result to one row
        per prompt: the KV cache, the next-token logits ``[B, V]``, the attention mask ``[B, P]``
        and the next position ``[B, 1]``.

        GRPO scores and samples ``n`` completions of one prompt, so the prompt's keys and
        values are computed once per group instead of ``n`` times. Causal attention makes this
        exact: no prompt position attends to a completion token. Gradients flow through the
        expansion (an index select), so the shared prompt receives the sum of its ``n`` rows'
        gradients, just as with ``n`` separate copies."""
        distinct: dict[tuple[int, ...], int] = {}
        index = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
        ids, mask = left_pad(list(distinct), self.pad_id)
        input_ids = torch.tensor(ids, device=self.device)
        attention = torch.tensor(mask, device=self.device)
        positions = positions_from_mask(attention)
        padded = not bool(attention.all())
        out = model(input_ids=input_ids, attention_mask=attention if padded else None, position_ids=positions,
                    use_cache=True, logits_to_keep=1)
        rows = torch.tensor(index, device=self.device)
        cache = getattr(out, _CACHE)
        if len(distinct) != len(index):
            cache.batch_select_indices(rows)
        return cache, out.logits[:, -1].index_select(0, rows), attention[rows], positions[rows, -1:] + 1

    @torch.inference_mode()
    def generate(self, name: str, prompts: Sequence[Sequence[int]], n: int) -> list[Generation]:
        """Sample ``n`` completions of every prompt in one batched call (prompt-major order:
        prompt 0's n completions first).

        Each distinct prompt is encoded once and its KV cache expanded to its ``n`` rows
        (:meth:`_encode_prompts`); then one forward per new token for the whole batch. The
        loop keeps everything on the device: the only host sync per token is the "all rows
        finished?" test, and token ids and log-probs are copied back once at the end. The KV
        cache grows in place (:func:`reserve_cache`), tokens are drawn with one uniform per
        row (:func:`sample_categorical`), and when no row is padded (equal-length prompts) no
        attention mask is passed at all, which lets the attention kernel skip masking."""
        cfg = self.config
        rows = [list(p) for p in prompts for _ in range(n)]
        eos = torch.tensor(self.eos_ids, dtype=torch.long, device=self.device)
        finished = torch.zeros(len(rows), dtype=torch.bool, device=self.device)
        tokens: list[torch.Tensor] = []
        logps: list[torch.Tensor] = []
        with self.active(name) as model:
            cache, logits, prompt_mask, next_position = self._encode_prompts(model, rows)
            reserve_cache(cache, cfg.max_new_tokens)
            # finished rows keep attending (to their pads); their outputs are ignored
            width = prompt_mask.shape[1]
            attention = None  # [B, width + max_new_tokens], sliced as the completions grow
            if not bool(prompt_mask.all()):
                attention = F.pad(prompt_mask, (0, cfg.max_new_tokens), value=1)
            for _ in range(cfg.max_new_tokens):
                logp_all = F.log_softmax(logits.float() / cfg.temperature, dim=-1)
                token = sample_categorical(logp_all.exp())
                token = torch.where(finished, torch.full_like(token, self.pad_id), token)
                tokens.append(token)
                logps.append(logp_all.gather(1, token[:, None]).squeeze(1))
                finished = finished | torch.isin(token, eos)
                if len(tokens) == cfg.max_new_tokens or bool(finished.all()):
                    break
                width += 1
                mask = None if attention is None else attention[:, :width]
                out = model(input_ids=token[:, None], attention_mask=mask, position_ids=next_position, use_cache=True,
                            **{_CACHE: cache})
                cache, logits = getattr(out, _CACHE), out.logits[:, -1]
                next_position = next_position + 1
        token_rows = torch.stack(tokens, dim=1).tolist()
        logp_rows = torch.stack(logps, dim=1).tolist()
        eos_ids = set(self.eos_ids)
        generations = []
        for row, token_row, logp_row in zip(rows, token_rows, logp_rows, strict=True):
            # the eos is part of the completion: the model learns to stop
            length = next((t + 1 for t, tok in enumerate(token_row) if tok in eos_ids), len(token_row))
            completion = token_row[:length]
            text = self.tokenizer.decode(completion, skip_special_tokens=True)
            generations.append(Generation(row, completion, logp_row[:length], text))
        return generations

    # ------------------------------------------------------------- scoring
    def token_logprobs(
        self, model: torch.nn.Module, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs ``[B, C]`` of the completion tokens under ``model`` (at the sampling
        temperature) and their mask; differentiable unless called under ``no_grad``.

        Two forwards instead of one over ``prompt + completion`` per row: every distinct
        prompt once (:meth:`_encode_prompts`, whose last logits predict the first completion
        token), then all completions (right-padded, without their last token, which predicts
        nothing) on top of the expanded prompt cache. The result is the same as scoring each
        row on its own; a GRPO group's ``n`` rows share one prompt, so the prompt costs once
        per group, and only completion positions reach the LM head."""
        width = max(len(c) for c in completions)
        cache, first_logits, prompt_mask, next_position = self._encode_prompts(model, prompts)
        completion_ids = torch.tensor([list(c) + [self.pad_id] * (width - len(c)) for c in completions],
                                      device=self.device)
        completion_mask = torch.tensor([[1] * len(c) + [0] * (width - len(c)) for c in completions],
                                       device=self.device)
        logits = first_logits[:, None]
        if width > 1:
            attention = torch.cat([prompt_mask, completion_mask[:, :-1]], dim=1)
            positions = next_position + torch.arange(width - 1, device=self.device)
            rest = model(input_ids=completion_ids[:, :-1], attention_mask=None if bool(attention.all()) else attention,
                         position_ids=positions, use_cache=True, **{_CACHE: cache}).logits
            logits = torch.cat([logits, rest], dim=1)
        logp = F.log_softmax(logits.float() / self.config.temperature, dim=-1)
        return logp.gather(2, completion_ids[..., None]).squeeze(2), completion_mask.float()

    # ----------------------------------------------------------- checkpoints
    def save(self, directory: Path) -> None:
        """Write every policy to ``directory/<name>/`` in a format ``from_pretrained`` loads
        (a full model, or a PEFT adapter directory)."""
        for name in self.names:
            target = directory / name
            if self.config.lora:
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
        """One line for logs: which role trains which policy, and how."""
        kind = f"LoRA r={self.config.lora_r} adapters on one base" if self.config.lora else "full models"
        return f"{len(self.names)} policies ({kind}): " + json.dumps(self.role_to_policy)

    def snapshot(self, name: str) -> dict[str, torch.Tensor]:
        """A detached copy of policy ``name``'s trainable parameters (tests, diagnostics)."""
        return {str(i): p.detach().clone() for i, p in enumerate(self._params[name])}

