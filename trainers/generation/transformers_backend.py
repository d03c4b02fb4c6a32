"""The in-process backend: the trained model samples itself (the default, any device).

:func:`generate` is the project's exact sampler, written out instead of ``model.generate`` so
that (a) the log-probability of every sampled token is recorded at generation time under
exactly the distribution it was drawn from (temperature-scaled softmax; no hidden top-k/top-p
from a generation config), and (b) the torch RNG stream, and therefore ``--resume``, is under
our control. Each distinct prompt is encoded once and its KV cache expanded to its ``n`` rows
(:mod:`trainers.generation.decoding`: on Llama-family models one copy of each prompt's keys and
values serves all its rows, elsewhere the cache grows in place), a token costs one float64 uniform per row
(:func:`trainers.generation.sampling.sample_categorical`), and nothing leaves the device until
the end. Per-request seeds make each completion a function of its prompt and seed
(:func:`trainers.generation.sampling.seeded_uniforms`).

:class:`TransformersGenerator` is the generation protocol over it. It reads the live policy, so
an update is visible to the next call without any copy: :meth:`TransformersGenerator.sync` has
nothing to do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from trainers.generation.backends import BACKENDS
from trainers.generation.decoding import decoder_for
from trainers.generation.protocol import Generation, LogprobSource, check_seeds
from trainers.generation.sampling import sample_categorical, seeded_uniforms
from trainers.models.policy_set import PolicySet

if TYPE_CHECKING:
    from trainers.generation.factory import GenerationSettings

#: ``on_step(tokens, token_logprobs, logprob_table)`` of :func:`generate`: the rows to end now.
StepHook = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Sequence[int]]


@torch.inference_mode()
def generate(policies: PolicySet, name: str, prompts: Sequence[Sequence[int]], n: int, *,
             seeds: Sequence[int] | None = None, temperature: float | None = None,
             max_new_tokens: int | None = None, shared_prefix: bool | None = None,
             on_step: StepHook | None = None) -> list[Generation]:
    """Sample ``n`` completions of every prompt by policy ``name`` of ``policies`` in one batched
    call (prompt-major order: prompt 0's n completions first).

    ``seeds`` (one per completion, prompt-major): completion ``i`` draws its uniforms from
    its own seed (:func:`seeded_uniforms`), so it depends on its prompt and seed only, not
    on the rest of the batch; None: from torch's global generator. ``temperature`` and
    ``max_new_tokens`` default to the policies' spec (the server overrides them per request);
    temperature 0 is greedy decoding, its log-probs taken at temperature 1.

    Each distinct prompt is encoded once; then one decode step per new token for the whole batch
    (:func:`~trainers.generation.decoding.decoder_for`: on a Llama-family model the rows of one
    prompt attend to a single copy of its keys and values, unless ``shared_prefix`` (default: the
    spec's) is off; otherwise the model's own forward on a KV cache that grows in place). The loop
    keeps everything on the device: the only host sync per token is the "all rows finished?" test,
    and token ids and log-probs are copied back once at the end. Tokens are drawn with one uniform
    per row (:func:`sample_categorical`). Forwards run in the compute dtype
    (:meth:`~trainers.models.policy_set.PolicySet.autocast`).

    ``on_step`` (the server's streaming, stop strings and cancellation) is called after every step
    with the step's tokens, their log-probs and the whole log-prob table (rows x vocabulary); the
    rows it returns end there, their last token included. It costs a host sync per token."""
    check_seeds(prompts, n, seeds)
    temperature = policies.spec.temperature if temperature is None else temperature
    budget = policies.spec.max_new_tokens if max_new_tokens is None else max_new_tokens
    shared_prefix = policies.spec.shared_prefix if shared_prefix is None else shared_prefix
    draws = None if seeds is None or temperature == 0 else seeded_uniforms(seeds, budget, policies.device)
    rows = [list(p) for p in prompts for _ in range(n)]
    eos = torch.tensor(policies.eos_ids, dtype=torch.long, device=policies.device)
    finished = torch.zeros(len(rows), dtype=torch.bool, device=policies.device)
    tokens: list[torch.Tensor] = []
    logps: list[torch.Tensor] = []
    cuts: dict[int, int] = {}  # row -> completion length, for the rows on_step ended
    with policies.active(name) as model, policies.autocast():
        decoder = decoder_for(model, rows, pad_id=policies.pad_id, device=policies.device, budget=budget,
                              shared_prefix=shared_prefix)
        logits = decoder.first
        # finished rows keep decoding (attending to their pads); their outputs are ignored
        for step in range(budget):
            if temperature == 0:
                logp_all = F.log_softmax(logits.float(), dim=-1)
                token = logp_all.argmax(dim=-1)
            else:
                logp_all = F.log_softmax(logits.float() if temperature == 1 else logits.float() / temperature, dim=-1)
                token = sample_categorical(logp_all.exp(), None if draws is None else draws[:, step:step + 1])
            token = torch.where(finished, torch.full_like(token, policies.pad_id), token)
            tokens.append(token)
            logps.append(logp_all.gather(1, token[:, None]).squeeze(1))
            finished = finished | torch.isin(token, eos)
            if on_step is not None:
                for row in on_step(token, logps[-1], logp_all):
                    cuts.setdefault(row, step + 1)
                    finished[row] = True
            if len(tokens) == budget or bool(finished.all()):
                break
            logits = decoder.step(token)
    return _generations(policies, rows, torch.stack(tokens, dim=1).tolist(), torch.stack(logps, dim=1).tolist(), cuts)


def _generations(policies: PolicySet, rows: Sequence[list[int]], token_rows: Sequence[list[int]],
                 logp_rows: Sequence[list[float]], cuts: dict[int, int]) -> list[Generation]:
    """Each row's completion: up to its first stop id, included (the model learns to stop), or its cut."""
    eos_ids = set(policies.eos_ids)
    generations = []
    for index, (row, token_row, logp_row) in enumerate(zip(rows, token_rows, logp_rows, strict=True)):
        length = next((t + 1 for t, tok in enumerate(token_row) if tok in eos_ids), len(token_row))
        length = min(length, cuts.get(index, length))
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
    def from_config(cls, settings: GenerationSettings, policies: PolicySet, *, seed: int = 0,
                    require_logprobs: bool = False, checkpoint: Path | None = None) -> TransformersGenerator:
        return cls(policies)  # the checkpoint's weights are already the policies'

    def generate(self, policy: str, prompts: Sequence[Sequence[int]], n: int, *,
                 seeds: Sequence[int] | None = None) -> list[Generation]:
        return generate(self.policies, policy, prompts, n, seeds=seeds)

    def sync(self, policy: str, model: Any) -> None:
        """Nothing to copy: the sampler is the trained model."""

    def close(self) -> None:
        """Nothing to release: the models belong to the :class:`PolicySet`."""
