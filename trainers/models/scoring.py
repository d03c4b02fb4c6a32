"""Scoring: the log-probability a model gives each completion token, memory-bounded and differentiable.

A GRPO group is ``n`` completions of one prompt, so every *distinct* prompt runs through the
model once (:mod:`trainers.models.prompt_cache`); then only the completion tokens run, attending
to one copy of their prompt's keys and values where the model allows it
(:mod:`trainers.models.shared_prefix`), and only they reach the LM head (:func:`token_logprobs`).

Memory (``ModelSpec.logprob_chunk_size``, ``gradient_checkpointing``): the completion
positions' final hidden states go through the LM head chunk by chunk, each chunk's log-prob of
the taken token computed as ``logit - logsumexp`` and its logits recomputed in the backward
(:func:`selective_logprobs`), so the ``[tokens, vocab]`` logits (0.6 GB per 1024 tokens in
float32 at a 152k vocabulary) never exist at once. With gradient checkpointing the decoder
layers recompute their activations in the backward as well (:func:`checkpointed_layers`).

Precision: forwards run under ``torch.autocast`` when the compute dtype is below float32
(:func:`autocast_region`); the log-probs are float32 whatever the compute dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint
from transformers.modeling_layers import GradientCheckpointingLayer

from trainers.models.prompt_cache import KV_CACHE_FIELD, encode_prompts, left_pad, positions_from_mask
from trainers.models.shared_prefix import completion_states, encode_prompt_groups, supports_shared_prefix

#: The most attention weights (elements, summed over layers) that scoring through the shared prompt
#: (:mod:`trainers.models.shared_prefix`) may keep for the backward: 16 M, 64 MB in float32, about
#: three times that with the softmax's input and the copies its products save. Its attention is
#: plain matrix products, whose weights grow with completion x context; past this the model's own
#: forward runs instead, whose fused attention keeps only per-token tensors.
SHARED_PREFIX_MAX_WEIGHTS = 1 << 24


def autocast_region(device: torch.device, dtype: torch.dtype) -> AbstractContextManager[Any]:
    """The compute-dtype region for forwards: ``torch.autocast`` when ``dtype`` is below float32,
    else nothing (float32 models take the plain path)."""
    if dtype == torch.float32:
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def selective_logprobs(
    hidden: torch.Tensor, targets: torch.Tensor, head: Callable[[torch.Tensor], torch.Tensor], *,
    temperature: float, chunk_size: int,
) -> torch.Tensor:
    """``log softmax(head(hidden) / temperature)[target]`` per row of ``hidden`` ``[N, H]``, in float32.

    Computed as ``logit[target] - logsumexp(logits)`` over chunks of ``chunk_size`` rows
    (0: one chunk). Under autograd each chunk's ``[chunk, V]`` logits are recomputed in the
    backward rather than kept, so the peak is one chunk's logits instead of ``N x V`` (plus
    the log-softmax copy and its gradient). A bias-free ``nn.Linear`` head (every causal LM's)
    takes :class:`_ChunkedLinearLogprobs`; any other head is checkpointed chunk by chunk."""

    def chunk_logprobs(h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        logits = head(h).float() / temperature
        return logits.gather(1, t[:, None]).squeeze(1) - torch.logsumexp(logits, dim=-1)

    chunk_size = chunk_size if 0 < chunk_size < hidden.shape[0] else hidden.shape[0]
    if torch.is_grad_enabled() and _plain_linear(head):
        return _ChunkedLinearLogprobs.apply(hidden, head.weight, targets, head, temperature, chunk_size)
    if chunk_size == hidden.shape[0]:
        return chunk_logprobs(hidden, targets)
    starts = range(0, hidden.shape[0], chunk_size)
    if not torch.is_grad_enabled():
        return torch.cat([chunk_logprobs(hidden[s:s + chunk_size], targets[s:s + chunk_size]) for s in starts])
    return torch.cat([checkpoint(chunk_logprobs, hidden[s:s + chunk_size], targets[s:s + chunk_size],
                                 use_reentrant=False) for s in starts])


def _plain_linear(head: Any) -> bool:
    """Whether ``head`` computes exactly ``hidden @ head.weight.T`` on a local tensor (not a
    sharded DTensor, whose full weight exists only inside its module's forward)."""
    if type(head) is not torch.nn.Linear or head.bias is not None:
        return False
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # a torch built without distributed
        return True
    return not isinstance(head.weight, DTensor)


class _ChunkedLinearLogprobs(torch.autograd.Function):
    """:func:`selective_logprobs` through a bias-free linear head, chunk by chunk, with a hand-written backward.

    Forward: per chunk (the last rows first), the head's logits (the module itself runs, under
    the caller's autocast) and ``logit[target] - logsumexp``; saved are ``hidden``, the targets,
    each row's ``logsumexp`` and, of the chunk computed last (the first rows), its
    probabilities ``exp(logit - logsumexp)``: the backward needs them first, so keeping them
    costs no more than the buffer the backward would allocate, and saves recomputing that
    chunk (with one chunk, nothing is recomputed). Backward: per chunk, the probabilities
    (kept, or recomputed into that same buffer) turned in place into the logits' gradient
    ``g * (onehot(target) - p) / temperature`` (the terms autograd gives for ``gather -
    logsumexp`` and the division), then ``grad_hidden = G @ W`` and ``grad_W += G^T @ hidden``
    into one buffer. Checkpointing each chunk instead costs its whole recomputation, a fresh
    ``[chunk, V]`` tensor per elementwise op of the replay and of its backward, and a ``[V, H]``
    weight gradient per chunk that autograd then adds up."""

    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, head: torch.nn.Module,
                temperature: float, chunk_size: int) -> torch.Tensor:
        out = torch.empty(hidden.shape[0], dtype=torch.float32, device=hidden.device)
        lse = torch.empty_like(out)
        for start in reversed(range(0, hidden.shape[0], chunk_size)):
            stop = min(start + chunk_size, hidden.shape[0])
            logits = head(hidden[start:stop]).float()
            if temperature != 1.0:
                logits = logits / temperature
            torch.logsumexp(logits, dim=-1, out=lse[start:stop])
            torch.sub(logits.gather(1, targets[start:stop, None]).squeeze(1), lse[start:stop], out=out[start:stop])
        ctx.save_for_backward(hidden, weight, targets, lse)
        ctx.kept = logits.sub_(lse[:stop, None]).exp_()  # an attribute, so the backward can free it
        ctx.temperature, ctx.chunk_size = temperature, chunk_size
        ctx.autocast_dtype = (torch.get_autocast_dtype(hidden.device.type)
                              if torch.is_autocast_enabled(hidden.device.type) else None)
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        hidden, weight, targets, lse = ctx.saved_tensors
        probs, ctx.kept = ctx.kept, None
        want_hidden, want_weight = ctx.needs_input_grad[:2]
        dtype = ctx.autocast_dtype or hidden.dtype  # the head's matmuls ran in the autocast dtype, if any
        grad_out = grad_out.float()
        grad_hidden = torch.empty_like(hidden) if want_hidden else None
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if want_weight else None
        w = weight.to(dtype)
        for start in range(0, hidden.shape[0], ctx.chunk_size):
            stop = min(start + ctx.chunk_size, hidden.shape[0])
            h, g = hidden[start:stop].to(dtype), grad_out[start:stop]
            if start > 0:  # recompute: the first chunk's probabilities were kept
                if dtype == torch.float32:
                    logits = torch.mm(h, w.t(), out=probs[:stop - start])
                else:
                    logits = torch.nn.functional.linear(h, w).float()
                if ctx.temperature != 1.0:
                    logits.div_(ctx.temperature)
                probs = logits.sub_(lse[start:stop, None]).exp_()
            grad = probs.mul_(-g[:, None])
            grad.index_put_((torch.arange(stop - start, device=grad.device), targets[start:stop]), g, accumulate=True)
            if ctx.temperature != 1.0:
                grad.div_(ctx.temperature)
            grad = grad.to(dtype)
            if grad_hidden is not None and dtype == hidden.dtype:
                torch.mm(grad, w, out=grad_hidden[start:stop])
            elif grad_hidden is not None:
                grad_hidden[start:stop] = grad @ w
            if grad_weight is not None:
                if dtype == torch.float32:
                    grad_weight.addmm_(grad.t(), h)
                else:
                    grad_weight += grad.t() @ h
        grad_weight = None if grad_weight is None else grad_weight.to(weight.dtype)
        return grad_hidden, grad_weight, None, None, None, None


def head_parts(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module] | None:
    """``(decoder, lm_head)`` of a causal LM whose logits are exactly ``lm_head(decoder(...))``;
    None for models that post-process their logits (Gemma-2's soft-capping, Cohere's and
    Granite's scaling), which are scored through their full forward instead."""
    config = getattr(model, "config", None)
    if config is not None and (getattr(config, "final_logit_softcapping", None)
                               or getattr(config, "logit_scale", 1.0) not in (None, 1.0)
                               or getattr(config, "logits_scaling", 1.0) not in (None, 1.0)):
        return None
    try:
        decoder, head = model.get_decoder(), model.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        return None
    if decoder is None or head is None or decoder is model:
        return None
    return decoder, head


@contextmanager
def checkpointed_layers(model: torch.nn.Module) -> Iterator[None]:
    """Activate transformers' gradient checkpointing of ``model``'s decoder layers for this block.

    transformers checkpoints a layer only when it is in training mode, and the policies
    stay in ``eval()`` (dropout would make recorded and recomputed log-probs differ); so only
    the flag of the checkpointed layers themselves is set, not their submodules' (dropout and
    attention dropout read their own flags and stay off)."""
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer) and m.gradient_checkpointing]
    for layer in layers:
        layer.training = True
    try:
        yield
    finally:
        for layer in layers:
            layer.training = False


def token_logprobs(
    model: torch.nn.Module, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]], *,
    pad_id: int, device: torch.device, compute_dtype: torch.dtype, temperature: float, chunk_size: int,
    checkpointed: bool, one_forward: bool = False, shared_prefix: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs ``[B, C]`` (float32; 0 at padding) of the completion tokens under ``model``
    (at ``temperature``) and their mask; differentiable unless called under ``no_grad``.

    Two forwards instead of one over ``prompt + completion`` per row: every distinct
    prompt once (:func:`encode_prompts`, whose last hidden state predicts the first
    completion token), then all completions (right-padded, without their last token, which
    predicts nothing) on top of the prompt's keys and values. The result is the same as
    scoring each row on its own; a GRPO group's ``n`` rows share one prompt, so the prompt
    costs once per group. On a model :func:`~trainers.models.shared_prefix.supports_shared_prefix`
    takes, the rows of a prompt attend to one copy of its keys and values
    (:func:`~trainers.models.shared_prefix.completion_states`) while the attention weights that
    keeps stay within :data:`SHARED_PREFIX_MAX_WEIGHTS`, unless ``shared_prefix`` is off; otherwise
    the model's own forward runs on the prompt cache expanded to every row. Only the real
    completion positions reach the LM head, in chunks of ``chunk_size`` (:func:`selective_logprobs`).
    With ``checkpointed`` (the model's layers set up for gradient checkpointing) and gradients on,
    a KV cache cannot be used (a recomputed layer would append to it twice): one forward over
    ``prompt + completion`` per row, its decoder layers checkpointed. ``one_forward`` takes that
    path always (gradients or not): the decoder then runs exactly once per call whatever the
    completions' widths, as a sharded model needs (every rank's forwards are collectives that must
    pair up)."""
    width = max(len(c) for c in completions)
    completion_ids = torch.tensor([list(c) + [pad_id] * (width - len(c)) for c in completions], device=device)
    completion_mask = torch.tensor([[1] * len(c) + [0] * (width - len(c)) for c in completions], device=device)
    parts = head_parts(model)
    with autocast_region(device, compute_dtype):
        if one_forward or (checkpointed and torch.is_grad_enabled()):
            states = _states_uncached(model, parts, prompts, completion_ids, completion_mask, pad_id=pad_id)
        elif shared_prefix and parts is not None and _shared_prefix_fits(model, prompts, width):
            groups = encode_prompt_groups(model, prompts, pad_id=pad_id, device=device)
            own_inputs = torch.cat([groups.last_tokens[:, None], completion_ids[:, :-1]], dim=1)
            states = completion_states(model, groups, own_inputs)
        else:
            states = _states_cached(model, parts, prompts, completion_ids, completion_mask, pad_id=pad_id)
        real = completion_mask.bool()
        head = parts[1] if parts is not None else torch.nn.Identity()
        flat = selective_logprobs(states[real], completion_ids[real], head, temperature=temperature,
                                  chunk_size=chunk_size)
    logp = torch.zeros(completion_ids.shape, dtype=flat.dtype, device=device).masked_scatter(real, flat)
    return logp, completion_mask.float()


def _shared_prefix_fits(model: torch.nn.Module, prompts: Sequence[Sequence[int]], width: int) -> bool:
    """Whether to score through :func:`~trainers.models.shared_prefix.completion_states`: the model
    is one it computes exactly, and the attention weights it keeps for the backward (``rows x
    heads x completion x (prompt + completion)`` per layer) stay within
    :data:`SHARED_PREFIX_MAX_WEIGHTS`."""
    if not supports_shared_prefix(model):
        return False
    config = model.config
    context = max(len(p) for p in prompts) + width
    weights = len(prompts) * config.num_attention_heads * width * context * config.num_hidden_layers
    return weights <= SHARED_PREFIX_MAX_WEIGHTS


def _states_cached(
    model: torch.nn.Module, parts: tuple[torch.nn.Module, torch.nn.Module] | None,
    prompts: Sequence[Sequence[int]], completion_ids: torch.Tensor, completion_mask: torch.Tensor, *, pad_id: int,
) -> torch.Tensor:
    """``[B, C, H]`` final hidden states predicting each completion token (logits ``[B, C, V]``
    when ``parts`` is None), through the shared prompt cache."""
    device = completion_ids.device
    decoder = parts[0] if parts is not None else None
    cache, first, prompt_mask, next_position = encode_prompts(model, prompts, pad_id=pad_id, device=device,
                                                              decoder=decoder)
    width = completion_ids.shape[1]
    if width == 1:
        return first[:, None]
    attention = torch.cat([prompt_mask, completion_mask[:, :-1]], dim=1)
    inputs = {"input_ids": completion_ids[:, :-1], "attention_mask": None if bool(attention.all()) else attention,
              "position_ids": next_position + torch.arange(width - 1, device=device), "use_cache": True,
              KV_CACHE_FIELD: cache}
    rest = model(**inputs).logits if decoder is None else decoder(**inputs).last_hidden_state
    return torch.cat([first[:, None], rest], dim=1)


def _states_uncached(
    model: torch.nn.Module, parts: tuple[torch.nn.Module, torch.nn.Module] | None,
    prompts: Sequence[Sequence[int]], completion_ids: torch.Tensor, completion_mask: torch.Tensor, *, pad_id: int,
) -> torch.Tensor:
    """As :func:`_states_cached`, from one checkpointed forward over each row's left-padded
    prompt followed by its completion (no cache)."""
    device = completion_ids.device
    prompt_ids, prompt_mask = left_pad(prompts, pad_id)
    prompt_width = len(prompt_ids[0])
    input_ids = torch.cat([torch.tensor(prompt_ids, device=device), completion_ids[:, :-1]], dim=1)
    attention = torch.cat([torch.tensor(prompt_mask, device=device), completion_mask[:, :-1]], dim=1)
    inputs = {"input_ids": input_ids, "attention_mask": attention, "position_ids": positions_from_mask(attention),
              "use_cache": False}
    with checkpointed_layers(model):
        out = model(**inputs).logits if parts is None else parts[0](**inputs).last_hidden_state
    return out[:, prompt_width - 1:]
