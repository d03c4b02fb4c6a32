"""The bodies ``pettingllm serve`` answers with, shaped as the OpenAI API defines them (pure).

Chat log-probs are ``{"content": [{token, logprob, bytes, top_logprobs}]}``; completion log-probs
are ``{tokens, token_logprobs, top_logprobs, text_offset}`` (``return_tokens_as_token_ids``
writes each token as ``token_id:N``, as vLLM does). A stream is server-sent events: one chunk per
drawn token, then a chunk with each choice's ``finish_reason``, the usage when
``stream_options.include_usage`` asks for it, and ``data: [DONE]``.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from typing import Any

from trainers.generation.protocol import Generation
from trainers.generation.server_engine import TokenLogprob


def _piece(entry_id: int, piece: str, as_ids: bool) -> str:
    return f"token_id:{entry_id}" if as_ids else piece


def chat_logprobs(entries: Sequence[TokenLogprob]) -> dict[str, Any]:
    def one(token: str, logprob: float) -> dict[str, Any]:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}

    return {"content": [{**one(e.piece, e.logprob), "top_logprobs": [one(p, v) for _, p, v in e.top]}
                        for e in entries], "refusal": None}


def completion_logprobs(entries: Sequence[TokenLogprob], as_ids: bool, start: int = 0) -> dict[str, Any]:
    tokens = [_piece(e.token_id, e.piece, as_ids) for e in entries]
    offsets = []
    for token in tokens:
        offsets.append(start)
        start += len(token)
    return {"tokens": tokens, "token_logprobs": [e.logprob for e in entries],
            "top_logprobs": [{_piece(t, p, as_ids): v for t, p, v in e.top} for e in entries],
            "text_offset": offsets}


def usage(prompts: Sequence[Sequence[int]], generations: Sequence[Generation]) -> dict[str, int]:
    prompt_tokens = sum(len(p) for p in prompts)
    completion_tokens = sum(len(g.completion_ids) for g in generations)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def envelope(kind: str, model: str, request_id: str | None = None) -> dict[str, Any]:
    return {"id": request_id or f"pettingllm-{secrets.token_hex(8)}", "object": kind, "created": int(time.time()),
            "model": model}


def chat_choice(index: int, generation: Generation, reason: str, logprobs: Sequence[TokenLogprob] | None) -> dict:
    return {"index": index, "message": {"role": "assistant", "content": generation.text},
            "logprobs": None if logprobs is None else chat_logprobs(logprobs), "finish_reason": reason}


def completion_choice(index: int, generation: Generation, reason: str, logprobs: Sequence[TokenLogprob] | None, *,
                      as_ids: bool, with_ids: bool) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": index, "text": generation.text, "finish_reason": reason,
                              "logprobs": None if logprobs is None else completion_logprobs(logprobs, as_ids)}
    if with_ids:
        choice["token_ids"] = generation.completion_ids
        choice["prompt_token_ids"] = generation.prompt_ids
    return choice


def chat_chunk(head: dict[str, Any], index: int, *, text: str | None = None, role: bool = False,
               logprobs: Sequence[TokenLogprob] | None = None, reason: str | None = None) -> dict[str, Any]:
    delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
    if text is not None:
        delta["content"] = text
    return {**head, "choices": [{"index": index, "delta": delta, "finish_reason": reason,
                                 "logprobs": None if logprobs is None else chat_logprobs(logprobs)}]}


def completion_chunk(head: dict[str, Any], index: int, *, text: str = "",
                     logprobs: Sequence[TokenLogprob] | None = None, as_ids: bool = False,
                     reason: str | None = None) -> dict[str, Any]:
    return {**head, "choices": [{"index": index, "text": text, "finish_reason": reason,
                                 "logprobs": None if logprobs is None else completion_logprobs(logprobs, as_ids)}]}


def sse(payload: dict[str, Any] | str) -> str:
    """One server-sent event."""
    return f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n"


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    if status == 429:
        kind = "rate_limit_error"
    return {"error": {"message": message, "type": kind, "code": status}}
