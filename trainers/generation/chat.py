"""The evaluation suite's ``hf:<model folder>`` policy, on the in-process sampler.

``pettingllm bench --policy hf:DIR`` plays a local causal LM. The env package loads no model
itself: it finds this completer through the entry-point group
:data:`pettingllm_envs.seats.MODEL_POLICIES` (``hf`` in ``pyproject.toml``), so the
suite decodes with exactly the trainer's prompt rendering (chat template, over-long prompts
losing the middle of their history) and stop ids (tokenizer eos and the generation config's),
greedily, through the in-process sampler (:func:`trainers.generation.transformers_backend.generate`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

from trainers.generation.transformers_backend import generate
from trainers.models.policy_set import PolicySet
from trainers.models.spec import ModelSpec

Messages = list[dict[str, str]]


@functools.cache
def _loaded(path: str) -> tuple[PolicySet, threading.Lock]:
    """The model at ``path`` and a lock, loaded once per path for the whole suite."""
    return PolicySet(ModelSpec(model=path), {"assistant": "shared"}), threading.Lock()


def hf_completer(path: str, *, max_tokens: int, usage: dict[str, int]) -> Callable[[Messages], str]:
    """``complete(messages) -> text``: greedy, at most ``max_tokens`` new tokens; adds each
    call's prompt and completion tokens to ``usage``."""
    policies, lock = _loaded(path)
    (policy,) = policies.names

    def complete(messages: Messages) -> str:
        with lock:  # one generation at a time; the suite's episodes still overlap their env work
            prompt = policies.encode_prompt(messages).ids
            (generation,) = generate(policies, policy, [prompt], 1, temperature=0.0, max_new_tokens=max_tokens)
        usage["prompt_tokens"] += len(prompt)
        usage["completion_tokens"] += len(generation.completion_ids)
        return generation.text

    return complete
