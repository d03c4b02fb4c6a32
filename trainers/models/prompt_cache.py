"""Encoding prompts once per group: the KV cache every row of a GRPO group starts from.

GRPO samples and scores ``n`` completions of one prompt, so every *distinct* prompt runs through
the model once (:func:`encode_distinct`); :func:`encode_prompts` then expands the result to one
row per completion for code that goes on through the model's own forward. Used by the sampler
(:mod:`trainers.generation.decoding`), the update's scoring (:mod:`trainers.models.scoring`,
:mod:`trainers.models.shared_prefix`) and the prompt-conditioned variant.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers.modeling_outputs import CausalLMOutputWithPast

#: The name of the model's KV-cache argument and output field: transformers 5 renamed it from
#: ``past_key_values`` to ``cache``.
KV_CACHE_FIELD = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[list[list[int]], list[list[int]]]:
    """Left-pad token rows to one length; returns ids and the attention mask."""
    width = max(len(r) for r in rows)
    ids = [[pad_id] * (width - len(r)) + list(r) for r in rows]
    mask = [[0] * (width - len(r)) + [1] * len(r) for r in rows]
    return ids, mask


def positions_from_mask(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that ignore left padding, so a padded prompt is encoded like an unpadded one."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def distinct_prompts(prompts: Sequence[Sequence[int]]) -> tuple[list[tuple[int, ...]], list[int]]:
    """The distinct prompts in order of first appearance, and each prompt's index among them."""
    distinct: dict[tuple[int, ...], int] = {}
    index = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
    return list(distinct), index


def encode_distinct(
    model: torch.nn.Module, prompts: Sequence[Sequence[int]], *, pad_id: int, device: torch.device,
    decoder: torch.nn.Module | None = None,
) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
    """Run every *distinct* prompt of ``prompts`` through ``model`` once (left-padded to one
    width); return the KV cache, the next-token logits ``[G, V]`` (with ``decoder``, the model's
    decoder: the last hidden state ``[G, H]`` instead), the attention mask ``[G, P]``, the next
    position ``[G, 1]`` of the ``G`` distinct prompts in order of first appearance, and each
    prompt's index among them."""
    distinct, index = distinct_prompts(prompts)
    ids, mask = left_pad(distinct, pad_id)
    input_ids = torch.tensor(ids, device=device)
    attention = torch.tensor(mask, device=device)
    positions = positions_from_mask(attention)
    padded = not bool(attention.all())
    inputs = {"input_ids": input_ids, "attention_mask": attention if padded else None, "position_ids": positions,
              "use_cache": True}
    if decoder is None:
        out = model(**inputs, logits_to_keep=1)
        last = out.logits[:, -1]
    else:
        out = decoder(**inputs)
        last = out.last_hidden_state[:, -1]
    return getattr(out, KV_CACHE_FIELD), last, attention, positions[:, -1:] + 1, index


def encode_prompts(
    model: torch.nn.Module, prompts: Sequence[Sequence[int]], *, pad_id: int, device: torch.device,
    decoder: torch.nn.Module | None = None,
) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run every *distinct* prompt through ``model`` once (:func:`encode_distinct`) and expand the
    result to one row per prompt: the KV cache, the next-token logits ``[B, V]`` (with
    ``decoder``, the last hidden state ``[B, H]``), the attention mask ``[B, P]`` and the next
    position ``[B, 1]``.

    GRPO scores and samples ``n`` completions of one prompt, so the prompt's keys and
    values are computed once per group instead of ``n`` times. Causal attention makes this
    exact: no prompt position attends to a completion token. Gradients flow through the
    expansion (an index select), so the shared prompt receives the sum of its ``n`` rows'
    gradients, just as with ``n`` separate copies."""
    cache, last, attention, next_position, index = encode_distinct(model, prompts, pad_id=pad_id, device=device,
                                                                   decoder=decoder)
    rows = torch.tensor(index, device=device)
    # The rows that share a prompt share its cache, so the backward adds their gradients: each
    # device gets the selection whose backward adds in a fixed order (the list of
    # torch.use_deterministic_algorithms). On a CPU that is index_select (reorder_cache): advanced
    # indexing back-propagates through an accumulating index_put that adds with atomics on more
    # than one thread, and a rerun's weights differed in the last bits. On CUDA it is the reverse.
    on_cpu = torch.device(device).type == "cpu"
    if attention.shape[0] != len(index):
        if on_cpu:
            cache.reorder_cache(rows)
        else:
            cache.batch_select_indices(rows)
    first = last.index_select(0, rows) if on_cpu else last[rows]
    return cache, first, attention[rows], next_position[rows]
