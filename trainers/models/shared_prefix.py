"""Attention with each prompt's keys and values shared by its ``n`` completions (plain Llama-family models).

A GRPO group is ``n`` completions of one prompt. Through transformers' forward every row carries
its own copy of its prompt's keys and values (:func:`trainers.models.prompt_cache.encode_prompts`
expands one copy to ``n`` rows), so every attention over the prompt reads ``n`` identical
copies, and in the backward their gradients are summed back by a scatter. Here the rows of a
prompt attend to one copy together (:func:`attend`: one batched product per prompt and key-value
head over the prompt, one per row over its own completion, a single softmax over both parts), so
the result is ordinary attention over ``prompt + completion`` up to float rounding. The layers
run as a handful of tensor operations instead of transformers' module calls, whose Python
overhead dominates a small model's step on a CPU.

The shared part is each prompt's *prefix*, all its tokens but the last (:func:`encode_prompt_groups`);
the last prompt token is the first input of every row's own part. Its final state predicts the
first completion token, and no other prompt position's final state is read by anything, so the
prefix's last layer computes only its keys and values (:func:`encode_prefixes`): of the prompt's
work, the last layer's queries, attention, output projection and MLP, and the final norm, are
never done.

Two users: the in-process sampler's decode step
(:class:`trainers.generation.decoding.SharedPrefixDecoder`) and the update's scoring forward
(:func:`completion_states`, through :func:`trainers.models.scoring.token_logprobs`). Only the
architectures whose layers compute exactly this are taken (:func:`supports_shared_prefix`).

Layout: the ``B`` rows are ``G`` groups of ``m`` consecutive rows, group ``g`` the rows of the
``g``-th distinct prompt (``m = n``: the sampler and the update both lay rows out so). Rows that do
not fall into such groups (a prompt repeated among the requests) become ``G = B`` groups of one,
each with its own copy of its prompt. Per layer the prompt keys and values are ``[G, KVH, P, D]``
(left-padded, the pads masked out), the rows' own ``[G, KVH, m, T, D]`` (the prompt's last token
then the completion), and the queries
``[G, KVH, m, L, D]`` with ``L`` the queries of one row per key-value head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from trainers.models.prompt_cache import distinct_prompts, left_pad, positions_from_mask

#: The causal LM classes whose decoder layer is ``x + attn(norm(x))`` then ``x + mlp(norm(x))``
#: with rotary attention (rotate-half form), RMS norms and a SiLU-gated MLP: what the layers here
#: compute. Checked by class, not by config, so that a wrapper (PEFT, a sharding wrapper) is never taken.
_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM")


def supports_shared_prefix(model: torch.nn.Module) -> bool:
    """Whether ``model`` computes exactly what this module computes: a Llama or full-attention
    Qwen2 causal LM (SiLU MLP, no logit post-processing) whose linear layers are plain
    ``nn.Linear`` on local tensors (not LoRA-wrapped, not sharded) and with no hooks that its
    forward would run."""
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


Linear = tuple[torch.Tensor, "torch.Tensor | None"]
"""A linear layer's weight and bias."""
Norm = tuple[torch.Tensor, float]
"""An RMS norm's weight and epsilon."""


class LayerWeights(NamedTuple):
    """One decoder layer's parameters, read out of its modules once per call: a decode step runs
    every layer per token, and each module attribute read costs a Python ``__getattr__``."""

    input_norm: Norm
    q: Linear
    k: Linear
    v: Linear
    o: Linear
    post_norm: Norm
    gate: Linear
    up: Linear
    down: Linear


def layer_weights(model: torch.nn.Module) -> list[LayerWeights]:
    """The :class:`LayerWeights` of every decoder layer of ``model`` (the tensors themselves, so an
    in-place optimiser step is seen)."""
    def linear(module: torch.nn.Module) -> Linear:
        return module.weight, module.bias

    def norm(module: torch.nn.Module) -> Norm:
        return module.weight, module.variance_epsilon

    return [LayerWeights(norm(layer.input_layernorm), linear(layer.self_attn.q_proj), linear(layer.self_attn.k_proj),
                         linear(layer.self_attn.v_proj), linear(layer.self_attn.o_proj),
                         norm(layer.post_attention_layernorm), linear(layer.mlp.gate_proj), linear(layer.mlp.up_proj),
                         linear(layer.mlp.down_proj)) for layer in model.model.layers]


def rms_norm(norm: Norm, x: torch.Tensor) -> torch.Tensor:
    """The Llama RMS norm: normalised in float32, scaled in the input dtype."""
    weight, eps = norm
    x32 = x.float()
    return weight * (x32 * torch.rsqrt(x32.square().mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding in the rotate-half form."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def mlp(layer: LayerWeights, x: torch.Tensor) -> torch.Tensor:
    """``x`` plus the layer's SiLU-gated MLP of its normalised ``x``."""
    h = rms_norm(layer.post_norm, x)
    return x + F.linear(F.silu(F.linear(h, *layer.gate)) * F.linear(h, *layer.up), *layer.down)


@dataclass
class PromptGroups:
    """Every distinct prompt's prefix, all its tokens but the last, encoded once in the group
    layout (module docstring). The last token is the first input of each row's own part: its
    state predicts the first completion token, so the prompt's final-layer outputs are never
    needed, and the prefix's last layer computes only its keys and values."""

    groups: int
    group_size: int
    last_tokens: torch.Tensor
    """``[B]`` each row's last prompt token."""
    start_position: torch.Tensor
    """``[B, 1]`` its position: the position of each row's first own input."""
    keys: list[torch.Tensor]
    """Per layer, ``[G, KVH, P, D]`` (rotated, as transformers caches them)."""
    values: list[torch.Tensor]
    bias: torch.Tensor
    """``[G, 1, 1, P]`` additive mask: 0, or -inf at a left pad."""


def encode_prompt_groups(model: torch.nn.Module, rows: Sequence[Sequence[int]], *, pad_id: int,
                         device: torch.device) -> PromptGroups:
    """Encode the prefixes of the distinct prompts of ``rows`` once (:func:`encode_prefixes`,
    differentiable) and lay them out in groups."""
    if not all(rows):
        raise ValueError("every prompt needs at least one token")
    distinct, index = distinct_prompts(rows)
    ids, mask = left_pad(distinct, pad_id)
    input_ids = torch.tensor(ids, device=device)
    prompt_mask = torch.tensor(mask, device=device, dtype=torch.bool)
    positions = positions_from_mask(prompt_mask)
    keys, values = encode_prefixes(model, input_ids[:, :-1], prompt_mask[:, :-1], positions[:, :-1])
    batch, count = len(rows), len(distinct)
    size = batch // count
    select = torch.tensor(index, device=device)
    prefix_mask = prompt_mask[:, :-1]
    if batch % count or index != [i // size for i in range(batch)]:
        count, size = batch, 1  # no group layout: every row its own group, with its own copy
        keys = [k.index_select(0, select) for k in keys]
        values = [v.index_select(0, select) for v in values]
        prefix_mask = prefix_mask.index_select(0, select)
    bias = torch.zeros(prefix_mask.shape, dtype=keys[0].dtype, device=device).masked_fill_(~prefix_mask, float("-inf"))
    return PromptGroups(groups=count, group_size=size, last_tokens=input_ids[:, -1].index_select(0, select),
                        start_position=positions[:, -1:].index_select(0, select), keys=keys, values=values,
                        bias=bias[:, None, None, :])


def encode_prefixes(model: torch.nn.Module, input_ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor
                    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per layer, the keys and values ``[G, KVH, P, D]`` of left-padded prefixes ``input_ids``
    ``[G, P]`` (``mask`` true at real tokens; ``positions`` theirs), causal among the real
    tokens; differentiable. The last layer computes its keys and values only."""
    inner, config = model.model, model.config
    groups, width = input_ids.shape
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    first_attention = inner.layers[0].self_attn
    dim, scaling = first_attention.head_dim, first_attention.scaling
    x = inner.embed_tokens(input_ids)
    cos, sin = inner.rotary_emb(x, positions)
    cos, sin = cos[:, :, None], sin[:, :, None]  # broadcast over heads
    allowed = None
    if not bool(mask.all()):
        # causal among real tokens; a pad attends to itself alone, which keeps its (unread) state finite
        causal = torch.ones(width, width, dtype=torch.bool, device=x.device).tril()
        allowed = (causal & mask[:, None, :]) | torch.eye(width, dtype=torch.bool, device=x.device)
        allowed = allowed[:, None]
    layers = layer_weights(model)
    keys: list[torch.Tensor] = []
    values: list[torch.Tensor] = []
    for i, layer in enumerate(layers):
        h = rms_norm(layer.input_norm, x)
        k = F.linear(h, *layer.k).view(groups, width, kv_heads, dim)
        values.append(F.linear(h, *layer.v).view(groups, width, kv_heads, dim).transpose(1, 2).contiguous())
        if i == len(layers) - 1:  # nothing reads the prefix's last-layer outputs
            keys.append(rotate(k, cos, sin).transpose(1, 2).contiguous())
            break
        q = F.linear(h, *layer.q).view(groups, width, heads, dim)
        q, k = rotate(torch.cat((q, k), dim=2), cos, sin).split((heads, kv_heads), dim=2)
        keys.append(k.transpose(1, 2).contiguous())
        out = F.scaled_dot_product_attention(q.transpose(1, 2), keys[-1], values[-1], attn_mask=allowed,
                                             is_causal=allowed is None, scale=scaling,
                                             enable_gqa=heads != kv_heads)
        x = mlp(layer, x + F.linear(out.transpose(1, 2).reshape(groups, width, heads * dim), *layer.o))
    return keys, values


def attend(q: torch.Tensor, prompt_keys: torch.Tensor, prompt_values: torch.Tensor, prompt_bias: torch.Tensor,
           own_keys: torch.Tensor, own_values: torch.Tensor, own_bias: torch.Tensor | None = None) -> torch.Tensor:
    """Attention of pre-scaled queries ``q`` ``[G, KVH, m, L, D]`` over their group's prompt
    (``[G, KVH, P, D]``, masked by ``prompt_bias``) and their row's own keys ``[G, KVH, m, T, D]``
    (masked by ``own_bias`` ``[L, T]`` when given: the causal mask of a whole completion), one
    softmax over both; returns ``[G, KVH, m, L, D]``."""
    groups, kv_heads, size, length, dim = q.shape
    prompt_length = prompt_keys.shape[-2]  # sizes spelled out: the prompt part may be empty
    # reshape, not view: a caller's permuted queries need not be contiguous (it copies them then)
    prompt_scores = torch.matmul(q.reshape(groups, kv_heads, size * length, dim), prompt_keys.transpose(-1, -2))
    prompt_scores = (prompt_scores + prompt_bias).view(groups, kv_heads, size, length, prompt_length)
    own_scores = torch.matmul(q, own_keys.transpose(-1, -2))
    if own_bias is not None:
        own_scores = own_scores + own_bias
    weights = torch.cat((prompt_scores, own_scores), dim=-1).softmax(-1, dtype=torch.float32).to(q.dtype)
    out = torch.matmul(weights[..., :prompt_length].reshape(groups, kv_heads, size * length, prompt_length),
                       prompt_values)
    return out.view(groups, kv_heads, size, length, dim) + torch.matmul(weights[..., prompt_length:], own_values)


def completion_states(model: torch.nn.Module, prompts: PromptGroups, input_ids: torch.Tensor) -> torch.Tensor:
    """The final hidden states ``[B, C, H]`` of each row's own inputs ``input_ids`` ``[B, C]``
    (its prompt's last token, then its completion, right-padded) after its prompt's prefix;
    differentiable. Row ``b``'s position ``c`` attends to its prefix and its own inputs up to ``c``
    (a pad, after every real token, is never attended to by one)."""
    inner = model.model
    config = model.config
    groups, size = prompts.groups, prompts.group_size
    batch, width = input_ids.shape
    kv_heads = config.num_key_value_heads
    heads = config.num_attention_heads
    per_kv = heads // kv_heads
    first_attention = inner.layers[0].self_attn
    dim, scaling = first_attention.head_dim, first_attention.scaling
    x = inner.embed_tokens(input_ids)
    positions = prompts.start_position + torch.arange(width, device=input_ids.device)
    cos, sin = inner.rotary_emb(x, positions)  # [B, C, D]
    cos, sin = cos[:, :, None], sin[:, :, None]  # broadcast over heads
    # query (c, j) of a row (completion position c, head j of its key-value head) sees own keys up to c
    causal = torch.ones(width, width, dtype=torch.bool, device=x.device).tril().repeat_interleave(per_kv, dim=0)
    own_bias = torch.zeros(causal.shape, dtype=x.dtype, device=x.device).masked_fill_(~causal, float("-inf"))
    for i, layer in enumerate(layer_weights(model)):
        h = rms_norm(layer.input_norm, x)
        q = F.linear(h, *layer.q).view(batch, width, heads, dim) * scaling
        k = F.linear(h, *layer.k).view(batch, width, kv_heads, dim)
        v = F.linear(h, *layer.v).view(batch, width, kv_heads, dim)
        q, k = rotate(torch.cat((q, k), dim=2), cos, sin).split((heads, kv_heads), dim=2)
        # rows -> [G, KVH, m, ...]: a group's rows side by side under each key-value head
        q = q.reshape(groups, size, width, kv_heads, per_kv, dim).permute(0, 3, 1, 2, 4, 5)
        q = q.reshape(groups, kv_heads, size, width * per_kv, dim)
        k = k.reshape(groups, size, width, kv_heads, dim).permute(0, 3, 1, 2, 4)
        v = v.reshape(groups, size, width, kv_heads, dim).permute(0, 3, 1, 2, 4)
        out = attend(q, prompts.keys[i], prompts.values[i], prompts.bias, k, v, own_bias)
        out = out.view(groups, kv_heads, size, width, per_kv, dim).permute(0, 2, 3, 1, 4, 5).reshape(batch, width, -1)
        x = mlp(layer, x + F.linear(out, *layer.o))
    return rms_norm((inner.norm.weight, inner.norm.variance_epsilon), x)


__all__ = ["LayerWeights", "PromptGroups", "attend", "completion_states", "encode_prefixes", "encode_prompt_groups",
           "layer_weights", "mlp", "rms_norm", "rotate", "supports_shared_prefix"]
