"""From chat messages to the prompt token ids a policy samples from, and the ids that end a completion.

:class:`PromptEncoder` is the tokenizer side of a policy: it renders messages with the chat
template (a plain transcript for base models without one), tokenizes them so that only the
template writes control tokens (:mod:`trainers.models.chat_tokens`), cuts an over-long prompt to
``max_prompt_tokens`` keeping its head and its end (:meth:`PromptEncoder.encode_prompt`), and
knows the pad id and the stop ids (:func:`stop_token_ids`). It needs no weights: a
:class:`~trainers.models.policy_set.PolicySet` is one, and a process that holds only a
tokenizer (the distributed trainer's driver) builds one on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from trainers.models.chat_tokens import encode_chat, encode_plain


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


class PromptEncoder:
    """A tokenizer's prompts and stop ids (module docstring)."""

    def __init__(self, tokenizer: Any, generation_config: Any, max_prompt_tokens: int) -> None:
        """``generation_config``: the model's (its ``eos_token_id`` adds stop ids); ``max_prompt_tokens``:
        the longest prompt :meth:`encode_prompt` returns."""
        self.tokenizer = tokenizer
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else tokenizer.eos_token_id)
        self.generation_config = generation_config
        self.eos_ids = stop_token_ids(tokenizer, generation_config)
        self.max_prompt_tokens = max_prompt_tokens

    def render(self, messages: Sequence[dict[str, str]]) -> str:
        """The chat-templated text of ``messages`` with the generation prompt."""
        if self.tokenizer.chat_template:
            text: str = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
            return text
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
        budget = self.max_prompt_tokens
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
