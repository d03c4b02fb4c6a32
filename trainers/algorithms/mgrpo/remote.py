"""The inference channel of a two-process M-GRPO run: the sub side serves the main side's
delegations like a remote tool.

The main side's :class:`RemoteSubSampler` posts the prompts of one batched sub-agent turn as
tick ``t`` under a prefix (a step's, or its evaluation's: :func:`trainers.algorithms.mgrpo.evaluation.eval_prefix`)
and waits for the action texts; the sub side's :func:`serve_ticks` answers every tick until the
main side posts ``done`` (:func:`done_record`). Only prompts and texts cross: the tokens and
log-probs stay on the side that sampled them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trainers.algorithms.mgrpo.rollout import Key
from trainers.algorithms.mgrpo.store import Store
from trainers.rollout.episodes import Messages


@dataclass
class RemoteAction:
    """A sub action as the main side sees it: text only (the tokens stay on the sub side)."""

    text: str


class RemoteSubSampler:
    """The main side's sampler for the sub-agent: posts the prompts as tick ``t`` under
    ``prefix`` and waits for the sub side's action texts."""

    def __init__(self, store: Store, prefix: str, timeout: float) -> None:
        self.store, self.prefix, self.timeout = store, prefix, timeout
        self.ticks = 0

    def __call__(self, agent: str, prompts: Sequence[Messages], keys: Sequence[Key]) -> list[RemoteAction]:
        tick = self.ticks
        self.store.put(f"{self.prefix}/tick/{tick}", {"kind": "generate", "items": [
            {"question": q, "rollout": r, "messages": list(m)} for (q, r), m in zip(keys, prompts, strict=True)]})
        self.store.heartbeat("main")
        texts = self.store.get(f"{self.prefix}/act/{tick}", timeout=self.timeout, waiting_for="sub")
        self.ticks += 1
        return [RemoteAction(text) for text in texts]

    def done_record(self) -> dict[str, Any]:
        """The record that tells the sub side no tick of this prefix follows."""
        return {f"{self.prefix}/tick/{self.ticks}": {"kind": "done"}}


def serve_ticks(store: Store, prefix: str, agent: str, sample: Callable[[str, list[Messages]], Sequence[Any]],
                timeout: float) -> dict[Key, list[Any]]:
    """The sub side's half: answer every tick under ``prefix`` with ``sample(agent, prompts)``
    (actions with a ``text``) until ``done``; returns each rollout's actions in order."""
    completions: dict[Key, list[Any]] = defaultdict(list)
    tick = 0
    while True:
        store.heartbeat("sub")
        message = store.get(f"{prefix}/tick/{tick}", timeout=timeout, waiting_for="main")
        if message["kind"] == "done":
            return completions
        items = message["items"]
        actions = sample(agent, [item["messages"] for item in items])
        for item, action in zip(items, actions, strict=True):
            completions[item["question"], item["rollout"]].append(action)
        store.put(f"{prefix}/act/{tick}", [a.text for a in actions])
        tick += 1


__all__ = ["RemoteAction", "RemoteSubSampler", "serve_ticks"]
