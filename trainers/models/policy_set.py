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

Precision (``TrainConfig.dtype`` is the *compute* dtype): trained weights and the AdamW
state stay float32 ("master weights"), and forwards run under ``torch.autocast`` when the
compute dtype is lower. A bfloat16 weight near 0.02 has a spacing of ~1e-4, so storing the
trained weights in bfloat16 silently drops most updates of a fine-tuning learning rate
(lr 1e-6 moves a weight by ~1e-6 per Adam step). Inside one autocast region torch casts
each float32 weight once and caches the copy, so a generation call works from a transient
bfloat16 copy of the weights (speed) while the stored parameters stay float32. Frozen weights (the
LoRA base model, the KL reference) are stored in the compute dtype: they never take an update.
With a float32 compute dtype nothing is cast and no autocast region is entered.

Memory of scoring (``TrainConfig.logprob_chunk_size``, ``gradient_checkpointing``): the
completion positions' final hidden states go through the LM head chunk by chunk, each
chunk's log-prob of the taken token computed as ``logit - logsumexp`` and its logits
recomputed in the backward, so the ``[tokens, vocab]`` logits (0.6 GB per 1024 tokens in
float32 at a 152k vocabulary) never exist at once. With gradient checkpointing the decoder
layers recompute their activations in the backward as well.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import CausalLMOutputWithPast

try:  # transformers >= 4.54 keeps one object per layer in its caches
    from transformers.cache_utils import DynamicLayer
except ImportError:  # older caches are lists of tensors: reserve_cache leaves them alone
    DynamicLayer = object

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.models.chat_tokens import encode_chat, encode_plain
from trainers.generation.protocol import Generation, check_seeds

#: The name of the model's KV-cache argument and output field: transformers 5 renamed it from
#: ``past_key_values`` to ``cache``.
KV_CACHE_FIELD = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


class PromptEncoding(NamedTuple):
    """A chat-templated prompt: its text, its token ids and whether history was cut to fit."""

    text: str
    ids: list[int]
    truncated: bool


#: Put where history was cut from an over-long prompt, so the model sees that something is missing.
TRUNCATION_MARKER = "\n[... earlier part cut to fit the prompt budget ...]\n"


def stop_token_ids(tokenizer: Any, generation_config: Any = None) -> list[int]:
    """The token ids that end a completion: the tokenizer's eos plus every id of the
    generation config's ``eos_token_id`` (an int or a list), deduplicated, tokenizer's first.

    Chat models often list their end-of-turn token (``<|im_end|>``, ``<|eot_id|>``) only in
    ``generation_config.json``; stopping on the tokenizer's eos alone would run every
    completion to ``max_new_tokens``, past the end of the model's turn."""
    listed = getattr(generation_config, "eos_token_id", None)
    candidates = [tokenizer.eos_token_id, *(listed if isinstance(listed, list | tuple) else [listed])]
    ids = list(dict.fromkeys(int(i) for i in candidates if i is not None))
    if not ids:
        raise ValueError("neither the tokenizer nor the generation config names an eos token; "
                         "completions could never end")
    return ids


def resolve_device(name: str) -> torch.device:
    """``auto`` picks cuda when available. A CUDA device that is not there is a
    :class:`~trainers.algorithms.atgrpo.config.ConfigError` (one line), not torch's assertion deep in a model load."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        from trainers.algorithms.atgrpo.config import ConfigError

        reason = "this torch build has no CUDA" if torch.version.cuda is None else "no CUDA GPU is visible"
        raise ConfigError(f"config field 'device': got {name!r}, but {reason}; allowed here: cpu or auto")
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


#: Vocabulary entries per block of the two-level sampler; vocabularies up to ``_DIRECT_VOCAB`` take one level.
_SAMPLER_BLOCK = 256
_DIRECT_VOCAB = 4096


def sample_categorical(probs: torch.Tensor, draw: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row of ``probs`` ``[B, V]`` (rows need not sum to 1): inverse-CDF
    sampling with one float64 uniform per row, exact on any vocabulary. ``draw``: the rows'
    uniforms in [0, 1) ``[B, 1]`` float64 (per-request seeded streams); None draws them from
    torch's global generator.

    The old way, a float32 cumulative sum and a float32 uniform, has a resolution of ~6e-8
    where the sum is near 1: on a real LM's 50k-150k vocabulary tens of thousands of tail
    tokens add nothing to the running sum and could never be drawn (~1e-4 to 1e-3 of the
    mass, and the rest off by as much in total variation). Here the cumulative sums and the
    uniform are float64 (resolution 2^-53), so every token's chance is its probability up to
    the float32 rounding of the probability itself. To stay fast on large vocabularies it
    runs in two levels: float32 sums of blocks of 256 entries (each a short sum, exact to
    ~1e-7 relative), a float64 cumulative sum over the blocks to pick one, and a float64
    cumulative sum inside the chosen block. That reads ``probs`` once; ``torch.multinomial``
    draws one exponential per entry (``B x V`` random numbers per token on CPU) and a float64
    cumulative sum over all of ``V`` converts and writes ``B x V`` doubles; both are ~10x slower
    at V = 152k. Zero-probability entries (and blocks) are never picked: ``searchsorted(right=True)``
    returns the first index whose cumulative mass exceeds the draw, a zero entry adds no mass,
    and the rounding edge cases are clamped to the last entry with mass."""
    rows, vocab = probs.shape
    if draw is None:
        draw = torch.rand(rows, 1, device=probs.device, dtype=torch.float64)
    if vocab <= _DIRECT_VOCAB:
        return _inverse_cdf(probs.to(torch.float64), draw).squeeze(1)
    block = _SAMPLER_BLOCK
    whole = vocab - vocab % block
    masses = [probs[:, :whole].view(rows, -1, block).sum(dim=-1)]
    if whole < vocab:
        masses.append(probs[:, whole:].sum(dim=-1, keepdim=True))
    mass = torch.cat(masses, dim=1).to(torch.float64)
    chosen, fraction = _inverse_cdf(mass, draw, residual=True)
    index = chosen * block + torch.arange(block, device=probs.device)
    inside = probs.gather(1, index.clamp(max=vocab - 1)).to(torch.float64) * (index < vocab)
    return (chosen * block + _inverse_cdf(inside, fraction)).squeeze(1)


def seeded_uniforms(seeds: Sequence[int], steps: int, device: torch.device) -> torch.Tensor:
    """``[len(seeds), steps]`` float64 uniforms in [0, 1): row ``i`` is the first ``steps``
    draws of a torch generator seeded with ``seeds[i]``. The sampler takes token ``t``'s
    uniform from column ``t``, so a completion is a function of its prompt and its seed, the
    same whichever requests share its batch (and a shorter budget gives a prefix)."""
    generator = torch.Generator()
    rows = []
    for seed in seeds:
        generator.manual_seed(seed)
        rows.append(torch.rand(steps, dtype=torch.float64, generator=generator))
    return torch.stack(rows).to(device)


def _inverse_cdf(weights: torch.Tensor, draw: torch.Tensor, *, residual: bool = False) -> Any:
    """Per row of float64 ``weights`` ``[B, N]``: the index ``[B, 1]`` where ``draw`` (a
    uniform in [0, 1) ``[B, 1]``) falls in the cumulative distribution; with ``residual``
    also where inside that entry's interval, as a fraction in [0, 1) (a fresh uniform for a
    second level, exact because the draw is uniform within the interval)."""
    cdf = weights.cumsum(dim=-1)
    total = cdf[:, -1:]
    target = draw * total
    last_with_mass = (cdf < total).sum(dim=-1, keepdim=True)  # the final entry that adds mass
    index = torch.searchsorted(cdf, target, right=True).clamp(max=last_with_mass)
    if not residual:
        return index
    below = torch.where(index > 0, cdf.gather(1, (index - 1).clamp(min=0)), torch.zeros_like(target))
    fraction = ((target - below) / weights.gather(1, index)).clamp(0.0, 1.0)
    return index, fraction


def selective_logprobs(
    hidden: torch.Tensor, targets: torch.Tensor, head: Callable[[torch.Tensor], torch.Tensor], *,
    temperature: float, chunk_size: int,
) -> torch.Tensor:
    """``log softmax(head(hidden) / temperature)[target]`` per row of ``hidden`` ``[N, H]``, in float32.

    Computed as ``logit[target] - logsumexp(logits)`` over chunks of ``chunk_size`` rows
    (0: one chunk). Under autograd each chunk is checkpointed, so only its ``hidden`` rows
    are kept and its ``[chunk, V]`` logits are recomputed in the backward: the peak is one
    chunk's logits instead of ``N x V`` (plus the log-softmax copy and its gradient)."""

    def chunk_logprobs(h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        logits = head(h).float() / temperature
        return logits.gather(1, t[:, None]).squeeze(1) - torch.logsumexp(logits, dim=-1)

    if chunk_size <= 0 or hidden.shape[0] <= chunk_size:
        return chunk_logprobs(hidden, targets)
    parts = []
    for start in range(0, hidden.shape[0], chunk_size):
        h, t = hidden[start:start + chunk_size], targets[start:start + chunk_size]
        if torch.is_grad_enabled():
            parts.append(checkpoint(chunk_logprobs, h, t, use_reentrant=False))
        else:
            parts.append(chunk_logprobs(h, t))
    return torch.cat(parts)


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
        self.compute_dtype: torch.dtype = getattr(torch, config.dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(config.model)
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.tokenizer.eos_token_id)

        def load(path: str | Path, *, frozen: bool, backpropagated: bool) -> torch.nn.Module:
            # trained weights are float32 master weights; frozen ones are stored in the compute dtype
            dtype = self.compute_dtype if frozen else torch.float32
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(self.device)
            if config.gradient_checkpointing and backpropagated:
                # (transformers 5.x renamed it activation_checkpointing_enable, deprecating the old name)
                kwargs = {"use_reentrant": False}
                if hasattr(model, "activation_checkpointing_enable"):
                    model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
                else:
                    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
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
            # the base is frozen, but the adapters' gradients flow through its layers
            base = load(config.model, frozen=True, backpropagated=True)
            self.generation_config = base.generation_config
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
                path = Path(init_dir) / name if init_dir is not None else config.model
                self.models[name] = load(path, frozen=False, backpropagated=True)
            self.generation_config = self.models[self.names[0]].generation_config
            self._params = {name: list(m.parameters()) for name, m in self.models.items()}
            if config.kl_coef > 0:
                self.reference = load(config.model, frozen=True, backpropagated=False).requires_grad_(False)
        self.eos_ids = stop_token_ids(self.tokenizer, self.generation_config)
        for params in self._params.values():
            for p in params:
                # PEFT keeps adapters of a low-precision base in float32 already; make it a guarantee
                p.data = p.data.float()
                p.requires_grad_(True)
        self.optimizers = {
            name: torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
            for name, params in self._params.items()
        }

    # ------------------------------------------------------------ structure
    def autocast(self) -> AbstractContextManager[Any]:
        """The compute-dtype region for forwards: ``torch.autocast`` when the compute dtype is
        below float32, else nothing (float32 models take the plain path)."""
        if self.compute_dtype == torch.float32:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.compute_dtype)

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
    def render(self, messages: Sequence[dict[str, str]]) -> str:
        """The chat-templated text of ``messages`` with the generation prompt."""
        if self.tokenizer.chat_template:
            return self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
        # base models without a template: a plain transcript
        return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "

    def _encode(self, messages: Sequence[dict[str, str]]) -> tuple[str, list[int]]:
        """Text and ids of the rendered prompt: control tokens only where the template put them."""
        return encode_chat(self.tokenizer, messages, self.render)

    def encode_prompt(self, messages: Sequence[dict[str, str]]) -> PromptEncoding:
        """Chat-template the messages (with the generation prompt) into at most
        ``max_prompt_tokens`` tokens.

        An over-long prompt loses the middle of its history, never its head or its end: the
        system message (the task and the action format) and the chat template's framing
        stay, and so does the latest turn. First whole messages between the system message
        and the last one go, oldest first; then the middle of the last message's text (an
        env's prompt is one user message whose history grows in the middle: task statement
        first, latest state and the request last), replaced by :data:`TRUNCATION_MARKER`.
        Whole messages go as exchanges (up to the next message in the role the history opened
        with), so templates that demand alternating roles still render. Only if the system
        message alone does not fit are the middle tokens of the rendered prompt cut (the
        marker in their place). ``truncated`` says whether anything was cut. A message's content
        never becomes a control token (:mod:`trainers.models.chat_tokens`)."""
        budget = self.config.max_prompt_tokens
        text, ids = self._encode(messages)
        if len(ids) <= budget:
            return PromptEncoding(text, ids, False)
        kept = list(messages)
        head = 1 if kept and kept[0].get("role") == "system" else 0
        opening_role = kept[head].get("role") if len(kept) > head else None
        while len(kept) > head + 1 and len(ids) > budget:
            # drop the oldest exchange after the system message: up to the next message in the
            # role the history opened with, so templates that demand alternating roles still render
            del kept[head]
            while len(kept) > head + 1 and kept[head].get("role") != opening_role:
                del kept[head]
            text, ids = self._encode(kept)
        if len(ids) > budget and len(kept) > head:
            last = dict(kept[-1])
            content = encode_plain(self.tokenizer, last["content"])
            overflow = len(ids) - budget + len(encode_plain(self.tokenizer, TRUNCATION_MARKER))
            for _ in range(4):  # re-tokenising the joined text can shift a few tokens: shrink and retry
                keep = len(content) - overflow
                if keep <= 0:
                    break
                front = self.tokenizer.decode(content[:keep - keep // 2])
                back = self.tokenizer.decode(content[len(content) - keep // 2:]) if keep // 2 else ""
                last["content"] = front + TRUNCATION_MARKER + back
                text, ids = self._encode([*kept[:-1], last])
                if len(ids) <= budget:
                    break
                overflow += len(ids) - budget
        if len(ids) > budget:  # the system message alone is too long: keep both ends of the tokens
            marker = encode_plain(self.tokenizer, TRUNCATION_MARKER)
            if len(marker) >= budget:  # no room for the note in a budget this small
                marker = []
            room = budget - len(marker)
            ids = ids[:room - room // 2] + marker + ids[len(ids) - room // 2:]
            text = self.tokenizer.decode(ids)
        return PromptEncoding(text, ids, True)

    # ----------------------------------------------------------- generation
    def _encode_prompts(
        self, model: torch.nn.Module, prompts: Sequence[Sequence[int]], *, decoder: torch.nn.Module | None = None
    ) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run every *distinct* prompt through ``model`` once and expand the result to one row
        per prompt: the KV cache, the next-token logits ``[B, V]`` (with ``decoder``, the
        model's decoder: the last hidden state ``[B, H]`` instead), the attention mask ``[B, P]``
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
        inputs = {"input_ids": input_ids, "attention_mask": attention if padded else None, "position_ids": positions,
                  "use_cache": True}
        if decoder is None:
            out = model(**inputs, logits_to_keep=1)
            last = out.logits[:, -1]
        else:
            out = decoder(**inputs)
            last = out.last_hidden_state[:, -1]
        rows = torch.tensor(index, device=self.device)
        cache = getattr(out, KV_CACHE_FIELD)
        if len(distinct) != len(index):
            cache.batch_select_indices(rows)
        return cache, last.index_select(0, rows), attention[rows], positions[rows, -1:] + 1

    @torch.inference_mode()
    def generate(self, name: str, prompts: Sequence[Sequence[int]], n: int, *, seeds: Sequence[int] | None = None,
                 temperature: float | None = None, max_new_tokens: int | None = None) -> list[Generation]:
        """Sample ``n`` completions of every prompt in one batched call (prompt-major order:
        prompt 0's n completions first); the generation protocol's in-process sampler
        (:mod:`trainers.generation.transformers_backend`).

        ``seeds`` (one per completion, prompt-major): completion ``i`` draws its uniforms from
        its own seed (:func:`seeded_uniforms`), so it depends on its prompt and seed only, not
        on the rest of the batch; None: from torch's global generator. ``temperature`` and
        ``max_new_tokens`` default to the config's (the server overrides them per request);
        temperature 0 is greedy decoding, its log-probs taken at temperature 1.

        Each distinct prompt is encoded once and its KV cache expanded to its ``n`` rows
        (:meth:`_encode_prompts`); then one forward per new token for the whole batch. The
        loop keeps everything on the device: the only host sync per token is the "all rows
        finished?" test, and token ids and log-probs are copied back once at the end. The KV
        cache grows in place (:func:`reserve_cache`), tokens are drawn with one uniform per
        row (:func:`sample_categorical`), and when no row is padded (equal-length prompts) no
        attention mask is passed at all, which lets the attention kernel skip masking.
        Forwards run in the compute dtype (:meth:`autocast`)."""
        check_seeds(prompts, n, seeds)
        temperature = self.config.temperature if temperature is None else temperature
        budget = self.config.max_new_tokens if max_new_tokens is None else max_new_tokens
        draws = None if seeds is None or temperature == 0 else seeded_uniforms(seeds, budget, self.device)
        rows = [list(p) for p in prompts for _ in range(n)]
        eos = torch.tensor(self.eos_ids, dtype=torch.long, device=self.device)
        finished = torch.zeros(len(rows), dtype=torch.bool, device=self.device)
        tokens: list[torch.Tensor] = []
        logps: list[torch.Tensor] = []
        with self.active(name) as model, self.autocast():
            cache, logits, prompt_mask, next_position = self._encode_prompts(model, rows)
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
                token = torch.where(finished, torch.full_like(token, self.pad_id), token)
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
        """Log-probs ``[B, C]`` (float32; 0 at padding) of the completion tokens under ``model``
        (at the sampling temperature) and their mask; differentiable unless called under ``no_grad``.

        Two forwards instead of one over ``prompt + completion`` per row: every distinct
        prompt once (:meth:`_encode_prompts`, whose last hidden state predicts the first
        completion token), then all completions (right-padded, without their last token, which
        predicts nothing) on top of the expanded prompt cache. The result is the same as
        scoring each row on its own; a GRPO group's ``n`` rows share one prompt, so the prompt
        costs once per group. Only the real completion positions reach the LM head, in chunks
        (:func:`selective_logprobs`). With ``gradient_checkpointing`` (and gradients on) a KV
        cache cannot be used (a recomputed layer would append to it twice): one forward over
        ``prompt + completion`` per row, its decoder layers checkpointed."""
        width = max(len(c) for c in completions)
        completion_ids = torch.tensor([list(c) + [self.pad_id] * (width - len(c)) for c in completions],
                                      device=self.device)
        completion_mask = torch.tensor([[1] * len(c) + [0] * (width - len(c)) for c in completions],
                                       device=self.device)
        parts = head_parts(model)
        with self.autocast():
            if self.config.gradient_checkpointing and torch.is_grad_enabled():
                states = self._states_uncached(model, parts, prompts, completion_ids, completion_mask)
            else:
                states = self._states_cached(model, parts, prompts, completion_ids, completion_mask)
            real = completion_mask.bool()
            head = parts[1] if parts is not None else torch.nn.Identity()
            flat = selective_logprobs(states[real], completion_ids[real], head, temperature=self.config.temperature,
                                      chunk_size=self.config.logprob_chunk_size)
        logp = torch.zeros(completion_ids.shape, dtype=flat.dtype, device=self.device).masked_scatter(real, flat)
        return logp, completion_mask.float()

    def _states_cached(
        self, model: torch.nn.Module, parts: tuple[torch.nn.Module, torch.nn.Module] | None,
        prompts: Sequence[Sequence[int]], completion_ids: torch.Tensor, completion_mask: torch.Tensor,
    ) -> torch.Tensor:
        """``[B, C, H]`` final hidden states predicting each completion token (logits ``[B, C, V]``
        when ``parts`` is None), through the shared prompt cache."""
        decoder = parts[0] if parts is not None else None
        cache, first, prompt_mask, next_position = self._encode_prompts(model, prompts, decoder=decoder)
        width = completion_ids.shape[1]
        if width == 1:
            return first[:, None]
        attention = torch.cat([prompt_mask, completion_mask[:, :-1]], dim=1)
        inputs = {"input_ids": completion_ids[:, :-1], "attention_mask": None if bool(attention.all()) else attention,
                  "position_ids": next_position + torch.arange(width - 1, device=self.device), "use_cache": True,
                  KV_CACHE_FIELD: cache}
        rest = model(**inputs).logits if decoder is None else decoder(**inputs).last_hidden_state
        return torch.cat([first[:, None], rest], dim=1)

    def _states_uncached(
        self, model: torch.nn.Module, parts: tuple[torch.nn.Module, torch.nn.Module] | None,
        prompts: Sequence[Sequence[int]], completion_ids: torch.Tensor, completion_mask: torch.Tensor,
    ) -> torch.Tensor:
        """As :meth:`_states_cached`, from one checkpointed forward over each row's left-padded
        prompt followed by its completion (no cache)."""
        prompt_ids, prompt_mask = left_pad(prompts, self.pad_id)
        prompt_width = len(prompt_ids[0])
        input_ids = torch.cat([torch.tensor(prompt_ids, device=self.device), completion_ids[:, :-1]], dim=1)
        attention = torch.cat([torch.tensor(prompt_mask, device=self.device), completion_mask[:, :-1]], dim=1)
        inputs = {"input_ids": input_ids, "attention_mask": attention, "position_ids": positions_from_mask(attention),
                  "use_cache": False}
        with checkpointed_layers(model):
            out = model(**inputs).logits if parts is None else parts[0](**inputs).last_hidden_state
        return out[:, prompt_width - 1:]

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

