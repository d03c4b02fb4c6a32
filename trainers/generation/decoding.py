"""The in-process sampler's decode step: the next-token logits of every row, one token at a time.

:class:`SharedPrefixDecoder` decodes a Llama-family model with each prompt's keys and values
kept once for its ``n`` rows (:mod:`trainers.models.shared_prefix`): through transformers'
forward every row carries its own copy of its prompt's KV cache, so each new token streams
``rows x prompt length`` keys and values through attention, ``n`` times the distinct ones; and
each layer runs as a handful of tensor operations instead of module calls, whose Python overhead
dominates a small model's decode step on a CPU. Any other model (:func:`supports_shared_prefix`
says which are taken) decodes through its own forward on a KV cache that grows in place
(:class:`ModelDecoder`). Both share one surface: the logits after the prompt (``first``), then
:meth:`step` per token.
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

from trainers.models.prompt_cache import KV_CACHE_FIELD, encode_prompts
from trainers.models.shared_prefix import (
    attend,
    encode_prompt_groups,
    layer_weights,
    mlp,
    rms_norm,
    rotate,
    supports_shared_prefix,
)


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


class SharedPrefixDecoder:
    """Decoding rows that share prompts, each distinct prompt's keys and values kept once
    (:mod:`trainers.models.shared_prefix`, whose module docstring gives the layout): the prompt's
    prefix ``[G, KVH, P, D]`` per layer, the rows' own keys in ``[G, KVH, m, budget, D]`` buffers
    that fill one position per step, the first with the prompt's last token (whose logits are
    ``first``)."""

    def __init__(self, model: torch.nn.Module, rows: Sequence[Sequence[int]], *, pad_id: int, device: torch.device,
                 budget: int) -> None:
        self.model = model
        self.prompts = encode_prompt_groups(model, rows, pad_id=pad_id, device=device)
        config, attention = model.config, model.model.layers[0].self_attn
        self.head_dim, self.scaling = attention.head_dim, attention.scaling
        self.kv_heads = config.num_key_value_heads
        self.heads_per_kv = config.num_attention_heads // self.kv_heads
        # a row's own part: its prompt's last token, then up to budget - 1 sampled tokens fed back
        shape = (self.prompts.groups, self.kv_heads, self.prompts.group_size, max(budget, 1), self.head_dim)
        dtype = self.prompts.keys[0].dtype
        self.keys = [torch.empty(shape, dtype=dtype, device=device) for _ in self.prompts.keys]
        self.values = [torch.empty(shape, dtype=dtype, device=device) for _ in self.prompts.keys]
        self.length = 0
        self.layers = layer_weights(model)
        inner = model.model
        self.embed = inner.embed_tokens.weight
        # every position's rotation at once: one call of the rotary module instead of one per token
        positions = self.prompts.start_position + torch.arange(max(budget, 1), device=device)
        cos, sin = inner.rotary_emb(self.embed, positions)  # [B, budget, D]; the first argument gives the dtype
        self.cos, self.sin = cos[:, :, None], sin[:, :, None]  # broadcast over heads
        self.final_norm = (inner.norm.weight, inner.norm.variance_epsilon)
        self.head = (model.lm_head.weight, model.lm_head.bias)
        self.first = self.step(self.prompts.last_tokens)

    def step(self, token: torch.Tensor) -> torch.Tensor:
        x = F.embedding(token, self.embed)  # [B, H]
        t = self.length
        self.length += 1
        cos, sin = self.cos[:, t], self.sin[:, t]  # [B, 1, D]
        groups, size, dim = self.prompts.groups, self.prompts.group_size, self.head_dim
        kv_heads, per_kv = self.kv_heads, self.heads_per_kv
        heads = kv_heads * per_kv
        for i, layer in enumerate(self.layers):
            h = rms_norm(layer.input_norm, x)
            q = F.linear(h, *layer.q).view(-1, heads, dim) * self.scaling
            k = F.linear(h, *layer.k).view(-1, kv_heads, dim)
            v = F.linear(h, *layer.v)
            # queries (pre-scaled) and keys rotated together: the rotation is linear and per head
            q, k = rotate(torch.cat((q, k), dim=1), cos, sin).split((heads, kv_heads), dim=1)
            # rows -> [G, KVH, m, ...]: a group's rows side by side under each key-value head
            self.keys[i][:, :, :, t] = k.unflatten(0, (groups, size)).transpose(1, 2)
            self.values[i][:, :, :, t] = v.view(groups, size, kv_heads, dim).transpose(1, 2)
            q = q.unflatten(0, (groups, size)).unflatten(2, (kv_heads, per_kv)).transpose(1, 2).contiguous()
            out = attend(q, self.prompts.keys[i], self.prompts.values[i], self.prompts.bias,
                         self.keys[i][..., :t + 1, :], self.values[i][..., :t + 1, :])
            out = out.transpose(1, 2).reshape(x.shape[0], -1)  # back to rows, heads in the model's order
            x = mlp(layer, x + F.linear(out, *layer.o))
        return F.linear(rms_norm(self.final_norm, x), *self.head)


def decoder_for(model: torch.nn.Module, rows: Sequence[Sequence[int]], *, pad_id: int, device: torch.device,
                budget: int, shared_prefix: bool = True) -> Decoder:
    """A :class:`SharedPrefixDecoder` when ``shared_prefix`` and the model supports it, else a
    :class:`ModelDecoder`."""
    kind = SharedPrefixDecoder if shared_prefix and supports_shared_prefix(model) else ModelDecoder
    return kind(model, rows, pad_id=pad_id, device=device, budget=budget)


__all__ = ["Decoder", "ModelDecoder", "SharedPrefixDecoder", "decoder_for", "reserve_cache"]
