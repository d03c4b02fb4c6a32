"""Decoding with each prompt's keys and values shared by its ``n`` completions (plain Llama-family models).

A GRPO sampling call decodes ``n`` completions of each of a few prompts. Through transformers'
forward, every row carries its own copy of its prompt's KV cache, so each new token streams
``rows x prompt length`` keys and values through attention: with prompts of ~100 tokens and
completions of ~30 that is most of the memory a decode step touches, eight times over at
``n = 8``. :class:`SharedPrefixDecoder` keeps one copy per distinct prompt and lets a prompt's
``n`` rows attend to it together (one matrix product per prompt and key-value head), each row then
to its own completion so far; the softmax runs over both parts at once, so the result is the
ordinary attention over ``prompt + completion`` up to float rounding. It also runs each decoder
layer as a handful of tensor operations instead of transformers' module calls, whose Python
overhead dominates a small model's decode step on a CPU.

Only the architectures whose decode step is exactly what :meth:`SharedPrefixDecoder.step` computes
are taken (:func:`supports_shared_prefix`: Llama and full-attention Qwen2, plain local weights, no
hooks); any other model decodes through its own forward (:class:`ModelDecoder`). Both share one
surface: the next-token logits of every row after the prompt (``first``), then :meth:`step`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch
import torch.nn.functional as F

try:  # transformers >= 4.54 keeps one object per layer in its caches
    from transformers.cache_utils import DynamicLayer
except ImportError:  # older caches are lists of tensors: reserve_cache leaves them alone
    DynamicLayer = object

from trainers.models.scoring import KV_CACHE_FIELD, encode_distinct, encode_prompts

#: The causal LM classes whose decoder layer is ``x + attn(norm(x))`` then ``x + mlp(norm(x))``
#: with rotary attention (rotate-half form), RMS norms and a SiLU-gated MLP: what the step computes.
#: Checked by class, not by config, so that a wrapper (PEFT, a sharding wrapper) is never taken.
_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM")


class Decoder(Protocol):
    """A batch of rows being decoded: ``first`` holds the logits ``[B, V]`` that predict each
    row's first new token; :meth:`step` appends one token per row and returns the next logits."""

    first: torch.Tensor

    def step(self, token: torch.Tensor) -> torch.Tensor: ...


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


class ModelDecoder:
    """Decoding through the model's own forward, on a KV cache that grows in place (any causal LM)."""

    def __init__(self, model: torch.nn.Module, rows: Sequence[Sequence[int]], *, pad_id: int, device: torch.device,
                 budget: int) -> None:
        self.model = model
        self.cache, self.first, prompt_mask, self.position = encode_prompts(model, rows, pad_id=pad_id, device=device)
        reserve_cache(self.cache, budget)
        self.width = prompt_mask.shape[1]
        # when no row is padded no mask is passed at all, which lets the attention kernel skip masking
        self.attention = None if bool(prompt_mask.all()) else F.pad(prompt_mask, (0, budget), value=1)

    def step(self, token: torch.Tensor) -> torch.Tensor:
        self.width += 1
        mask = None if self.attention is None else self.attention[:, :self.width]
        out = self.model(input_ids=token[:, None], attention_mask=mask, position_ids=self.position, use_cache=True,
                         **{KV_CACHE_FIELD: self.cache})
        self.cache = getattr(out, KV_CACHE_FIELD)
        self.position = self.position + 1
        return out.logits[:, -1]


def supports_shared_prefix(model: torch.nn.Module) -> bool:
    """Whether ``model`` decodes exactly as :class:`SharedPrefixDecoder` computes: a Llama or
    full-attention Qwen2 causal LM (SiLU MLP, no logit post-processing) whose linear layers are
    plain ``nn.Linear`` on local tensors (not LoRA-wrapped, not sharded) and with no hooks that
    its forward would run."""
    if type(model).__name__ not in _ARCHITECTURES or type(model).__module__.split(".")[0] != "transformers":
        return False
    config, inner = model.config, model.model
    if getattr(config, "hidden_act", None) != "silu" or getattr(config, "pretraining_tp", 1) not in (None, 1):
        return False
    if any(kind != "full_attention" for kind in (getattr(config, "layer_types", None) or ())):
        return False
    if type(getattr(model, "lm_head", None)) is not torch.nn.Linear:
        return False
    for layer in getattr(inner, "layers", ()):
        attention, mlp = layer.self_attn, layer.mlp
        linears = (attention.q_proj, attention.k_proj, attention.v_proj, attention.o_proj,
                   mlp.gate_proj, mlp.up_proj, mlp.down_proj)
        if any(type(linear) is not torch.nn.Linear for linear in linears):
            return False
    if any(m._forward_hooks or m._forward_pre_hooks for m in model.modules()):
        return False
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # a torch built without distributed has no sharded tensors
        return True
    return not any(isinstance(p, DTensor) for p in model.parameters())


def _rms_norm(norm: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The Llama RMS norm (normalised in float32, scaled in the input dtype) as one kernel."""
    return norm.weight * F.rms_norm(x.float(), (x.shape[-1],), eps=norm.variance_epsilon).to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class SharedPrefixDecoder:
    """Decoding rows that share prompts, each distinct prompt's keys and values kept once (module docstring).

    Layout: the ``B`` rows are ``G`` groups of ``m`` consecutive rows, group ``g`` the rows of
    distinct prompt ``g`` (``m = n``, as the sampler lays rows out). Rows that do not fall into
    such groups (a prompt repeated among the requests) decode as ``G = B`` groups of one, each
    with its own copy of its prompt. Per layer the prompt keys/values are ``[G, KVH, P, D]``
    (left-padded; the pads masked out) and the completion keys/values ``[G, KVH, m, budget, D]``,
    so a query tensor ``[G, KVH, m, heads per KVH, D]`` meets the prompt in one batched product
    ``[G, KVH, m * heads per KVH, P]`` and its own completion in another."""

    def __init__(self, model: torch.nn.Module, rows: Sequence[Sequence[int]], *, pad_id: int, device: torch.device,
                 budget: int) -> None:
        self.model = model
        config = model.config
        cache, last, prompt_mask, positions, index = encode_distinct(model, rows, pad_id=pad_id, device=device)
        distinct = int(prompt_mask.shape[0])
        batch = len(rows)
        self.groups, self.group_size = distinct, batch // distinct
        select = torch.tensor(index, device=device)
        if index != [i // self.group_size for i in range(batch)] or batch % distinct:
            self.groups, self.group_size = batch, 1  # no shared layout: every row its own group
            cache.reorder_cache(select)
            prompt_mask, last, positions = prompt_mask[select], last[select], positions[select]
            select = torch.arange(batch, device=device)
        self.first = last.index_select(0, select) if self.group_size > 1 else last
        self.position = positions.index_select(0, select)  # [B, 1]: the next position of each row
        attention = model.model.layers[0].self_attn
        self.head_dim = attention.head_dim
        self.kv_heads = config.num_key_value_heads
        self.heads_per_kv = config.num_attention_heads // self.kv_heads
        self.scaling = attention.scaling
        self.prompt_keys = [layer.keys for layer in cache.layers]
        self.prompt_values = [layer.values for layer in cache.layers]
        dtype = self.prompt_keys[0].dtype
        # additive mask over the prompt positions, [G, 1, 1, P] (0 or -inf at a left pad)
        self.prompt_bias = torch.zeros(prompt_mask.shape, dtype=dtype, device=device).masked_fill_(
            ~prompt_mask.bool(), float("-inf"))[:, None, None, :]
        shape = (self.groups, self.kv_heads, self.group_size, budget, self.head_dim)
        self.keys = [torch.empty(shape, dtype=dtype, device=device) for _ in cache.layers]
        self.values = [torch.empty(shape, dtype=dtype, device=device) for _ in cache.layers]
        self.length = 0

    def step(self, token: torch.Tensor) -> torch.Tensor:
        inner = self.model.model
        x = inner.embed_tokens(token)  # [B, H]
        cos, sin = inner.rotary_emb(x[:, None], self.position)  # [B, 1, D]: broadcast over heads
        self.position = self.position + 1
        t = self.length
        self.length += 1
        groups, size, dim = self.groups, self.group_size, self.head_dim
        kv_heads, per_kv = self.kv_heads, self.heads_per_kv
        heads = kv_heads * per_kv
        for i, layer in enumerate(inner.layers):
            attention = layer.self_attn
            h = _rms_norm(layer.input_layernorm, x)
            q = F.linear(h, attention.q_proj.weight, attention.q_proj.bias).view(-1, heads, dim) * self.scaling
            k = F.linear(h, attention.k_proj.weight, attention.k_proj.bias).view(-1, kv_heads, dim)
            v = F.linear(h, attention.v_proj.weight, attention.v_proj.bias)
            # queries (pre-scaled) and keys rotated together: the rotation is linear and per head
            q, k = _rotate(torch.cat((q, k), dim=1), cos, sin).split((heads, kv_heads), dim=1)
            # rows -> [G, KVH, m, ...]: the group's rows side by side under each key-value head
            self.keys[i][:, :, :, t] = k.unflatten(0, (groups, size)).transpose(1, 2)
            self.values[i][:, :, :, t] = v.view(groups, size, kv_heads, dim).transpose(1, 2)
            q = q.unflatten(0, (groups, size)).unflatten(2, (kv_heads, per_kv)).transpose(1, 2).contiguous()
            prompt_scores = torch.matmul(q.view(groups, kv_heads, size * per_kv, dim),
                                         self.prompt_keys[i].transpose(-1, -2))
            prompt_scores = (prompt_scores + self.prompt_bias).view(groups, kv_heads, size, per_kv, -1)
            own_scores = torch.matmul(q, self.keys[i][..., :t + 1, :].transpose(-1, -2))
            weights = torch.cat((prompt_scores, own_scores), dim=-1).softmax(-1, dtype=torch.float32).to(q.dtype)
            prompt_length = prompt_scores.shape[-1]
            out = torch.matmul(weights[..., :prompt_length].reshape(groups, kv_heads, size * per_kv, -1),
                               self.prompt_values[i]).view(groups, kv_heads, size, per_kv, dim)
            out = out + torch.matmul(weights[..., prompt_length:], self.values[i][..., :t + 1, :])
            out = out.transpose(1, 2).reshape(x.shape[0], -1)  # back to rows, heads in the model's order
            x = x + F.linear(out, attention.o_proj.weight, attention.o_proj.bias)
            mlp = layer.mlp
            h = _rms_norm(layer.post_attention_layernorm, x)
            gate = F.silu(F.linear(h, mlp.gate_proj.weight, mlp.gate_proj.bias))
            x = x + F.linear(gate * F.linear(h, mlp.up_proj.weight, mlp.up_proj.bias),
                             mlp.down_proj.weight, mlp.down_proj.bias)
        head = self.model.lm_head
        return F.linear(_rms_norm(inner.norm, x), head.weight, head.bias)


def decoder_for(model: torch.nn.Module, rows: Sequence[Sequence[int]], *, pad_id: int, device: torch.device,
                budget: int, shared_prefix: bool = True) -> Any:
    """A :class:`SharedPrefixDecoder` when ``shared_prefix`` and the model supports it, else a
    :class:`ModelDecoder`."""
    kind = SharedPrefixDecoder if shared_prefix and supports_shared_prefix(model) else ModelDecoder
    return kind(model, rows, pad_id=pad_id, device=device, budget=budget)


__all__ = ["Decoder", "ModelDecoder", "SharedPrefixDecoder", "decoder_for", "reserve_cache", "supports_shared_prefix"]
