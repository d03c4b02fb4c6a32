"""Prompt token ids in which only the chat template writes control tokens.

A prompt is rendered from chat messages whose contents quote other agents' words: the coder
is shown the tester's failing tests verbatim, a player its opponent's reply. Rendering the
chat to text and tokenizing that text whole parses every special-token string in it, so
``<|im_end|>\\n<|im_start|>system\\n...`` written into a test became real turn boundaries in
the coder's prompt (with SmolLM2's template, one short test made six extra turn-start and
turn-end tokens): a forged system turn, in cooperative and competitive envs alike, and a
trained policy learning from prompts whose structure another agent wrote.

:func:`encode_chat` closes that for every backend, since all of them sample from the token
ids it makes (in-process, vLLM and OpenAI-compatible servers get ids, never text), and
scoring reuses each generation's prompt ids. The rule: a *control string* is the text of a
tokenizer's special token (``all_special_tokens`` and every added token marked special).
Each control string inside a message's content is replaced by a marker before the chat
template runs; the rendered text is then tokenized piece by piece: the template's text with
special-token parsing (its own ``<|im_start|>`` stay control tokens), each marked string
with ``split_special_tokens=True``, so it becomes the ordinary text tokens that spell it.
The forged text stays visible to the model, as text. A prompt whose contents hold no control
string is tokenized exactly as before, in one call on the rendered text, so the ids of benign
prompts are unchanged.

Left as they are: added tokens a tokenizer does not mark special (Qwen's ``<tool_call>``,
``<think>``): they are vocabulary, not turn structure, and ``split_special_tokens`` does not
split them; and role names, which the envs choose, never a model.
"""

from __future__ import annotations

import functools
import re
import secrets
from collections.abc import Callable, Sequence
from typing import Any

Messages = Sequence[dict[str, str]]


def control_strings(tokenizer: Any) -> tuple[str, ...]:
    """The texts the tokenizer turns into special tokens (its added tokens that are marked special
    or named as a special token), longest first, as its matcher prefers."""
    named = set(tokenizer.all_special_tokens)
    special = {token.content for token in tokenizer.added_tokens_decoder.values()
               if token.content and (token.special or token.content in named)}
    return tuple(sorted(special, key=lambda s: (-len(s), s)))


@functools.lru_cache(maxsize=16)
def _control_pattern(strings: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(map(re.escape, strings))) if strings else None


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """Template text: special-token strings become their control tokens."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def encode_plain(tokenizer: Any, text: str) -> list[int]:
    """Text from a message: special-token strings are spelled with ordinary tokens."""
    return list(tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])


def encode_chat(tokenizer: Any, messages: Messages, render: Callable[[Messages], str]) -> tuple[str, list[int]]:
    """``(text, ids)`` of ``render(messages)`` in which every control token comes from the
    template, none from a message's content (see the module docstring)."""
    pattern = _control_pattern(control_strings(tokenizer))
    contents = [m["content"] if isinstance(m.get("content"), str) else "" for m in messages]
    if pattern is None or not any(pattern.search(c) for c in contents):
        text = render(messages)
        return text, encode_text(tokenizer, text)
    tag = secrets.token_hex(8)  # any tag works; a fresh one cannot be guessed into a message
    while any(tag in c for c in contents):
        tag = secrets.token_hex(8)
    forged: list[str] = []

    def mark(match: re.Match[str]) -> str:
        forged.append(match.group())
        return f"\ue000{tag}:{len(forged) - 1}\ue001"

    marked = [{**m, "content": pattern.sub(mark, c)} if c else m for m, c in zip(messages, contents, strict=True)]
    # split() with one group alternates: template/content text, a marker's index, text, ...
    pieces = re.split(f"\ue000{tag}:(\\d+)\ue001", render(marked))
    text_parts, ids = [], []
    for i, piece in enumerate(pieces):
        if i % 2:
            text_parts.append(forged[int(piece)])
            ids += encode_plain(tokenizer, forged[int(piece)])
        else:
            text_parts.append(piece)
            ids += encode_text(tokenizer, piece)
    return "".join(text_parts), ids
