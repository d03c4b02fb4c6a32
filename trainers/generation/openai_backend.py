"""Generation through an OpenAI-compatible completions server (``vllm serve``, SGLang,
``pettingllm serve``, llama.cpp), for generation-only use and, explicitly, off-policy training.

Every completion is one ``POST {base_url}/completions`` request whose ``prompt`` is the
trainer's token ids (chat-templated and truncated by the trainer, so the server sees exactly
what the in-process backend would, and never text in which it could parse a message's
special-token strings as control tokens), with ``n=1`` and the completion's own ``seed``; at most
``concurrency`` requests are in flight, and retries go through the env package's client
(:func:`pettingllm_envs.model_policies.openai_policy.post_json`), which a seed makes idempotent.
A server that honours seeds (vLLM, ``pettingllm serve``) gives the same completion for the
same seed however its batches are formed.

What comes back, and what is made of it:

* token ids, when the server returns them: ``token_ids`` of the choice (vLLM's
  ``return_token_ids``) or the ``logprobs.tokens`` spelled ``token_id:<id>`` (vLLM's
  ``return_tokens_as_token_ids``; ``pettingllm serve`` answers both);
* otherwise the text, re-tokenized with the trainer's tokenizer (the ids the policy would
  have had to emit to write it, so a special-token string in it stays text tokens,
  :func:`~trainers.models.chat_tokens.encode_plain`; the update scores those) and cut to the completion budget
  (another tokenizer's text can take more of ours), and no log-probs; the env then gets the
  decoded ids, so the action and the trained tokens always agree;
* per-token log-probs (``logprobs.token_logprobs``, requested with ``logprobs: 1``) when
  the ids came back with them. They must be at the sampling temperature (``vllm serve
  --logprobs-mode processed_logprobs``; vLLM's default is the raw model's) for the truncated
  importance-sampling weights to mean anything;
* a completion that ended on a stop (``finish_reason: stop``) without a stop id at its end
  (the server dropped it, or the text was re-tokenized) gets the tokenizer's eos appended,
  so that the model still learns to stop; its log-probs are then unknown (None).

Weights: the trainer cannot load its updates into a server it does not control, so
:attr:`OpenAIGenerator.follows_updates` is False and :meth:`OpenAIGenerator.sync` changes
nothing. ``TrainConfig.validate`` refuses training on this backend unless
``off_policy_generation`` is set; then, with ``importance_sampling`` auto (truncated), a
server that returns no log-probs is an error at the first step rather than an uncorrected
update.

Anything a server can send is checked: ids outside the vocabulary, more tokens than asked
for, log-probs that are not finite non-positive numbers or not one per token, a missing
choice: each is an :class:`~pettingllm_envs.model_policies.openai_policy.EndpointError` naming
the server and what was wrong, never a crash deep in the update.
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pettingllm_envs.model_policies.openai_policy import EndpointError, post_json
from trainers.generation.backends import BACKENDS
from trainers.generation.protocol import Generation, LogprobSource, check_seeds
from trainers.models.chat_tokens import encode_plain

if TYPE_CHECKING:
    from trainers.generation.factory import GenerationSettings
    from trainers.models.policy_set import PolicySet

#: vLLM's spelling of a token in ``logprobs.tokens`` under ``return_tokens_as_token_ids``.
_TOKEN_ID = re.compile(r"token_id:(\d+)")


def completion_request(model: str, prompt: Sequence[int], *, max_tokens: int, temperature: float,
                       seed: int | None, stop_token_ids: Sequence[int]) -> dict[str, Any]:
    """The body of one completion request (pure). ``stop_token_ids``, ``return_token_ids`` and
    ``return_tokens_as_token_ids`` are vLLM's (and SGLang's, ``pettingllm serve``'s) extensions;
    other servers ignore what they do not know."""
    body: dict[str, Any] = {"model": model, "prompt": list(prompt), "max_tokens": max_tokens,
                            "temperature": temperature, "n": 1, "logprobs": 1, "stop_token_ids": list(stop_token_ids),
                            "return_token_ids": True, "return_tokens_as_token_ids": True}
    if seed is not None:
        body["seed"] = seed
    return body


def parse_completion(payload: dict[str, Any], *, where: str, tokenize: Any, stop_ids: Sequence[int],
                     vocab_size: int, max_tokens: int) -> tuple[list[int], list[float] | None]:
    """``(completion ids, per-token log-probs or None)`` from one completion response (see the
    module docstring); ``tokenize(text) -> ids`` re-tokenizes when the ids did not come back.
    Raises :class:`EndpointError` on anything malformed."""
    try:
        (choice,) = payload["choices"]
        text = choice.get("text") or ""
        finish = choice.get("finish_reason")
        logprobs = choice.get("logprobs") or {}
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise EndpointError(f"{where}: expected one choice, got {str(payload)[:300]}") from error
    if not isinstance(text, str) or not isinstance(logprobs, dict):
        raise EndpointError(f"{where}: malformed choice {str(choice)[:300]}")
    tokens, token_logprobs = logprobs.get("tokens"), logprobs.get("token_logprobs")
    ids: list[int] | None = None
    if isinstance(choice.get("token_ids"), list):
        ids = choice["token_ids"]
    elif isinstance(tokens, list) and tokens and all(isinstance(t, str) and _TOKEN_ID.fullmatch(t) for t in tokens):
        ids = [int(_TOKEN_ID.fullmatch(t).group(1)) for t in tokens]  # type: ignore[union-attr]
    values: list[float] | None = None
    if ids is None:
        ids = list(tokenize(text))[:max_tokens]
    else:
        if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < vocab_size for i in ids):
            raise EndpointError(f"{where}: token ids outside the vocabulary of {vocab_size}: {str(ids)[:300]}")
        if token_logprobs is not None:
            if not (isinstance(token_logprobs, list) and len(token_logprobs) == len(ids)
                    and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v <= 0
                            for v in token_logprobs)):
                raise EndpointError(f"{where}: expected {len(ids)} finite log-probs <= 0, got "
                                    f"{str(token_logprobs)[:300]}")
            values = [float(v) for v in token_logprobs]
        if len(ids) > max_tokens:
            raise EndpointError(f"{where}: {len(ids)} completion tokens for a budget of {max_tokens}")
    if finish == "stop" and (not ids or ids[-1] not in stop_ids) and len(ids) < max_tokens:
        ids = [*ids, stop_ids[0]]  # the stop the server left out: the policy must learn to emit it
        values = None
    return ids, values


class OpenAIGenerator:
    """:class:`trainers.generation.protocol.Generator` over an OpenAI-compatible server (see the module docstring)."""

    follows_updates = BACKENDS["openai"].follows_updates
    logprob_source: LogprobSource = BACKENDS["openai"].logprob_source

    def __init__(self, base_url: str, model: str, *, tokenizer: Any, stop_token_ids: Sequence[int],
                 temperature: float, max_new_tokens: int, vocab_size: int | None = None, concurrency: int = 8,
                 require_logprobs: bool = False, api_key: str | None = None, timeout: float = 120.0,
                 retries: int = 3) -> None:
        """``vocab_size``: ids the model can score (its embedding rows; default the tokenizer's
        length); ``require_logprobs``: a completion without log-probs is an error (truncated IS)."""
        if not stop_token_ids:
            raise ValueError("no stop ids: completions that end on a stop could not be marked as ended")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size if vocab_size is not None else len(tokenizer)
        self.stop_token_ids = list(stop_token_ids)
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self.require_logprobs = require_logprobs
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout, self.retries = timeout, retries
        self.policy: str | None = None
        # A fast tokenizer is not safe for concurrent calls (its padding state is shared); the
        # request threads take turns.
        self._tokenizer_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="openai-generator")

    @classmethod
    def from_config(cls, settings: GenerationSettings, policies: PolicySet, *, seed: int = 0,
                    require_logprobs: bool = False, checkpoint: Path | None = None) -> OpenAIGenerator:
        if len(policies.names) != 1:
            raise ValueError(f"generation_backend='openai' serves one model, so one policy; this run has "
                             f"{len(policies.names)} ({', '.join(policies.names)}): use the shared regime")
        (policy,) = policies.names
        with policies.active(policy) as model:
            vocab_size = model.get_input_embeddings().num_embeddings
        spec = policies.spec
        generator = cls(settings.openai_base_url, settings.openai_model or spec.model, tokenizer=policies.tokenizer,
                        stop_token_ids=policies.eos_ids, temperature=spec.temperature,
                        max_new_tokens=spec.max_new_tokens, vocab_size=vocab_size,
                        concurrency=settings.openai_concurrency, require_logprobs=require_logprobs)
        generator.policy = policy
        return generator

    def _tokenize(self, text: str) -> list[int]:
        """A text-only answer's ids: a control string in it was written with text tokens (the
        server's decoding drops real special tokens), so it must not turn into a control token."""
        with self._tokenizer_lock:
            return encode_plain(self.tokenizer, text)

    def _complete(self, prompt: Sequence[int], seed: int | None) -> Generation:
        url = f"{self.base_url}/completions"
        body = completion_request(self.model, prompt, max_tokens=self.max_new_tokens, temperature=self.temperature,
                                  seed=seed, stop_token_ids=self.stop_token_ids)
        payload = post_json(url, body, api_key=self.api_key, timeout=self.timeout, retries=self.retries)
        ids, logprobs = parse_completion(payload, where=url, tokenize=self._tokenize, stop_ids=self.stop_token_ids,
                                         vocab_size=self.vocab_size, max_tokens=self.max_new_tokens)
        if logprobs is None and self.require_logprobs:
            raise EndpointError(f"{url}: no per-token log-probs (with token ids) came back, and truncated importance "
                                "sampling needs them to correct for the server's stale policy: serve with vLLM "
                                "(--logprobs-mode processed_logprobs) or pettingllm serve, or set "
                                "importance_sampling=none to train on uncorrected off-policy samples")
        with self._tokenizer_lock:
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return Generation(list(prompt), ids, logprobs, text)

    def generate(self, policy: str, prompts: Sequence[Sequence[int]], n: int, *,
                 seeds: Sequence[int] | None = None) -> list[Generation]:
        """One request per completion, prompt-major, ``concurrency`` at a time."""
        if self.policy is not None and policy != self.policy:
            raise ValueError(f"this server backend samples policy {self.policy!r}, not {policy!r}")
        check_seeds(prompts, n, seeds)
        rows = [prompt for prompt in prompts for _ in range(n)]
        row_seeds = list(seeds) if seeds is not None else [None] * len(rows)
        return list(self._pool.map(self._complete, rows, row_seeds))

    def sync(self, policy: str, model: Any) -> None:
        """Nothing can be sent: the server keeps the weights it was started with
        (``follows_updates`` is False; the trainer refuses this unless ``off_policy_generation``)."""

    def close(self) -> None:
        self._pool.shutdown(wait=True)
