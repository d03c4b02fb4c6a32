"""The in-process backend: the trained model samples itself (the default, any device).

:func:`generate` is the project's exact sampler, written out instead of ``model.generate`` so
that (a) the log-probability of every sampled token is recorded at generation time under
exactly the distribution it was drawn from (temperature-scaled softmax; no hidden top-k/top-p
from a generation config), and (b) the torch RNG stream, and therefore ``--resume``, is under
our control. Each distinct prompt is encoded once and its KV cache expanded to its ``n`` rows
(:func:`trainers.models.scoring.encode_prompts`); the cache then grows in place instead of by
concatenation (:func:`reserve_cache`), a token costs one float64 uniform per row
(:func:`trainers.generation.sampling.sample_categorical`), and nothing leaves the device until
the end. Per-request seeds make each completion a function of its prompt and seed
(:func:`trainers.generation.sampling.seeded_uniforms`).

:class:`TransformersGenerator` is the generation protocol over it. It reads the live policy, so
an update is visible to the next call without any copy: :meth:`TransformersGenerator.sync` has
nothing to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

try:  # transformers >= 4.54 keeps one object per layer in its caches
    from transformers.cache_utils import DynamicLayer
except ImportError:  # older caches are lists of tensors: reserve_cache leaves them alone
    DynamicLayer = object

from trainers.generation.backends import BACKENDS
from trainers.generation.protocol import Generation, LogprobSource, check_seeds
from trainers.generation.sampling import sample_categorical, seeded_uniforms
from trainers.models.policy_set import PolicySet
from trainers.models.scoring import KV_CACHE_FIELD, encode_prompts

if TYPE_CHECKING:
    from trainers.generation.factory import GeneratorOptions


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


@torch.inference_mode()
def generate(policies: PolicySet, name: str, prompts: Sequence[Sequence[int]], n: int, *,
             seeds: Sequence[int] | None = None, temperature: float | None = None,
             max_new_tokens: int | None = None) -> list[Generation]:
    """Sample ``n`` completions of every prompt by policy ``name`` of ``policies`` in one batched
    call (prompt-major order: prompt 0's n completions first).

    ``seeds`` (one per completion, prompt-major): completion ``i`` draws its uniforms from
    its own seed (:func:`seeded_uniforms`), so it depends on its prompt and seed only, not
    on the rest of the batch; None: from torch's global generator. ``temperature`` and
    ``max_new_tokens`` default to the policies' spec (the server overrides them per request);
    temperature 0 is greedy decoding, its log-probs taken at temperature 1.

    Each distinct prompt is encoded once and its KV cache expanded to its ``n`` rows
    (:func:`~trainers.models.scoring.encode_prompts`); then one forward per new token for the
    whole batch. The loop keeps everything on the device: the only host sync per token is the "all rows
    finished?" test, and token ids and log-probs are copied back once at the end. The KV
    cache grows in place (:func:`reserve_cache`), tokens are drawn with one uniform per
    row (:func:`sample_categorical`), and when no row is padded (equal-length prompts) no
    attention mask is passed at all, which lets the attention kernel skip masking.
    Forwards run in the compute dtype (:meth:`~trainers.models.policy_set.PolicySet.autocast`)."""
    check_seeds(prompts, n, seeds)
    temperature = policies.spec.temperature if temperature is None else temperature
    budget = policies.spec.max_new_tokens if max_new_tokens is None else max_new_tokens
    draws = None if seeds is None or temperature == 0 else seeded_uniforms(seeds, budget, policies.device)
    rows = [list(p) for p in prompts for _ in range(n)]
    eos = torch.tensor(policies.eos_ids, dtype=torch.long, device=policies.device)
    finished = torch.zeros(len(rows), dtype=torch.bool, device=policies.device)
    tokens: list[torch.Tensor] = []
    logps: list[torch.Tensor] = []
    with policies.active(name) as model, policies.autocast():
        cache, logits, prompt_mask, next_position = encode_prompts(model, rows, pad_id=policies.pad_id,
                                                                   device=policies.device)
        reserve_cache(cache, budget)
        # finished rows keep attending (to their pads); their outputs are ignored
        width = prompt_mask.shape[1]
        attention = None  # [B, width + budget], sliced as the completions grow
        if not bool(prompt_mask.all()):
            attention = F.pad(prompt_mask, (0, budget), value=1)
        for step in range(budget):
            if temperature == 0:
                logp_all = F.log_softmax(logits.float(), dim=-1)
                token = logp_all.argmax(dim=-1)
            else:
                logp_all = F.log_softmax(logits.float() / temperature, dim=-1)
                token = sample_categorical(logp_all.exp(), None if draws is None else draws[:, step:step + 1])
            token = torch.where(finished, torch.full_like(token, policies.pad_id), token)
            tokens.append(token)
            logps.append(logp_all.gather(1, token[:, None]).squeeze(1))
            finished = finished | torch.isin(token, eos)
            if len(tokens) == budget or bool(finished.all()):
                break
            width += 1
            mask = None if attention is None else attention[:, :width]
            out = model(input_ids=token[:, None], attention_mask=mask, position_ids=next_position, use_cache=True,
                        **{KV_CACHE_FIELD: cache})
            cache, logits = getattr(out, KV_CACHE_FIELD), out.logits[:, -1]
            next_position = next_position + 1
    token_rows = torch.stack(tokens, dim=1).tolist()
    logp_rows = torch.stack(logps, dim=1).tolist()
    eos_ids = set(policies.eos_ids)
    generations = []
    for row, token_row, logp_row in zip(rows, token_rows, logp_rows, strict=True):
        # the eos is part of the completion: the model learns to stop
        length = next((t + 1 for t, tok in enumerate(token_row) if tok in eos_ids), len(token_row))
        completion = token_row[:length]
        text = policies.tokenizer.decode(completion, skip_special_tokens=True)
        generations.append(Generation(row, completion, logp_row[:length], text))
    return generations


class TransformersGenerator:
    """:class:`trainers.generation.protocol.Generator` over a :class:`PolicySet` (:func:`generate`)."""

    follows_updates = BACKENDS["transformers"].follows_updates
    logprob_source: LogprobSource = BACKENDS["transformers"].logprob_source

    def __init__(self, policies: PolicySet) -> None:
        self.policies = policies

    @classmethod
    def from_config(cls, options: GeneratorOptions, policies: PolicySet, *,
                    checkpoint: Path | None = None) -> TransformersGenerator:
        return cls(policies)  # the checkpoint's weights are already the policies'

    def generate(self, policy: str, prompts: Sequence[Sequence[int]], n: int, *,
                 seeds: Sequence[int] | None = None) -> list[Generation]:
        return generate(self.policies, policy, prompts, n, seeds=seeds)

    def sync(self, policy: str, model: Any) -> None:
        """Nothing to copy: the sampler is the trained model."""

    def close(self) -> None:
        """Nothing to release: the models belong to the :class:`PolicySet`."""
