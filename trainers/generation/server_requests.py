"""What ``pettingllm serve`` takes from a request body, and what it refuses (pure, no torch).

Each OpenAI field is either served as the OpenAI API defines it, accepted when it asks for the
default behaviour (``top_p`` 1, penalties 0, ``tool_choice`` "none", ...), ignored because it
changes nothing here (``user``, ``metadata``, ``store``), or refused with a 400 that names it:
tool calling, structured output and the other sampling controls the sampler does not have are
never silently dropped. A field sent as null counts as absent, as the OpenAI API has it.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Any

from trainers.maths.seeding import SEED_BITS, derive_seed

#: OpenAI's default completion budget when a request names none.
DEFAULT_MAX_TOKENS = 16
#: Most completions one request may ask for (``n`` times its number of prompts): the one sampling
#: thread serves requests in turn, so a bigger request would hold every other client up.
MAX_N = 128
#: OpenAI's limits: at most 4 stop sequences, at most 20 alternatives per token.
MAX_STOP = 4
MAX_TOP_LOGPROBS = 20

#: Fields that change nothing about the answer.
IGNORED = frozenset({"user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier"})
#: Fields accepted only with the value that asks for the default behaviour.
NEUTRAL: dict[str, tuple[Any, ...]] = {
    "top_p": (1,), "frequency_penalty": (0,), "presence_penalty": (0,), "logit_bias": ({},),
    "tool_choice": ("none",), "parallel_tool_calls": (False, True), "echo": (False,), "best_of": (1,),
    "suffix": ("",), "top_k": (-1, 0), "min_p": (0,), "repetition_penalty": (1,),
}
#: Why the fields this server refuses are refused.
REFUSED = {
    "tools": "tool calling is not supported; describe the tools in the messages and parse the reply",
    "functions": "function calling is not supported; describe the functions in the messages and parse the reply",
    "function_call": "function calling is not supported",
    "response_format": "structured output is not supported: the sampler does not constrain tokens",
    "prediction": "predicted outputs are not supported", "audio": "audio is not supported",
    "modalities": "only text is served", "reasoning_effort": "the served model has no reasoning settings",
    "web_search_options": "web search is not supported",
}
SAMPLING_FIELDS = frozenset({"model", "n", "max_tokens", "temperature", "seed", "stop", "stream", "stream_options",
                             "logprobs", "stop_token_ids"})
CHAT_FIELDS = SAMPLING_FIELDS | {"messages", "max_completion_tokens", "top_logprobs"}
COMPLETION_FIELDS = SAMPLING_FIELDS | {"prompt", "return_token_ids", "return_tokens_as_token_ids"}


class RequestError(ValueError):
    """A request the server cannot answer; ``status`` is the HTTP status it gets."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Sampling:
    """How each completion of a request is sampled and reported."""

    n: int
    seed: int | None
    temperature: float
    max_tokens: int
    stop: tuple[str, ...] = ()
    top_logprobs: int | None = None
    """Alternatives reported per token; None: no log-probs at all."""
    stream: bool = False
    include_usage: bool = False


def completion_seeds(seed: int | None, n: int) -> list[int]:
    """The seed of each of a request's ``n`` completions: ``seed`` for the first, ``derive_seed(seed, i)``
    after; a random one for a request without a seed."""
    base = secrets.randbits(SEED_BITS) if seed is None else seed
    return [base if i == 0 else derive_seed(base, i) for i in range(n)]


def check_fields(body: dict[str, Any], allowed: frozenset[str]) -> None:
    """A 400 naming the first field this server would otherwise have to drop silently."""
    for name, value in body.items():
        if value is None or name in allowed or name in IGNORED:
            continue
        if name in NEUTRAL:
            # True == 1 in Python: a boolean only matches a boolean
            if any(isinstance(value, bool) == isinstance(v, bool) and value == v for v in NEUTRAL[name]):
                continue
            raise RequestError(f"{name!r} = {value!r} is not supported: this server only takes "
                               f"{' or '.join(repr(v) for v in NEUTRAL[name])} (the default)")
        reason = REFUSED.get(name, "this server does not know it")
        raise RequestError(f"{name!r} is not supported: {reason}")


def number(body: dict[str, Any], name: str, default: float, *, integer: bool = False) -> Any:
    value = body.get(name, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
        raise RequestError(f"{name!r} must be {'an integer' if integer else 'a number'}, got {value!r}")
    if not integer and not math.isfinite(value):
        raise RequestError(f"{name!r} must be a finite number, got {value!r}")
    return value


def check_text(text: str, what: str) -> None:
    """JSON may carry lone surrogates (``"\\ud800"``), which no tokenizer can encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise RequestError(f"{what} is not valid Unicode text ({error.reason} at position {error.start})") from None


def _stop_strings(body: dict[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops) or len(stops) > MAX_STOP:
        raise RequestError(f"'stop' must be a non-empty string or a list of at most {MAX_STOP}, got {stop!r}")
    for text in stops:
        check_text(text, "a 'stop' sequence")
    return tuple(stops)


def _max_tokens(body: dict[str, Any], limit: int) -> int:
    name = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = number(body, name, DEFAULT_MAX_TOKENS, integer=True)
    if not 1 <= max_tokens <= limit:
        raise RequestError(f"{name!r} must be in [1, {limit}] (--max-new-tokens), got {max_tokens}")
    return max_tokens


def _logprobs(body: dict[str, Any], chat: bool) -> int | None:
    if chat:
        wanted = body.get("logprobs")
        if wanted is not None and not isinstance(wanted, bool):
            raise RequestError(f"'logprobs' must be true or false in a chat request, got {wanted!r}")
        top = number(body, "top_logprobs", 0, integer=True)
        if not 0 <= top <= MAX_TOP_LOGPROBS or (top and not wanted):
            raise RequestError(f"'top_logprobs' must be in [0, {MAX_TOP_LOGPROBS}], with 'logprobs' true")
        return top if wanted else None
    top = body.get("logprobs")
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_TOP_LOGPROBS):
        raise RequestError(f"'logprobs' must be an integer in [0, {MAX_TOP_LOGPROBS}], got {top!r}")
    return top


def sampling(body: dict[str, Any], *, chat: bool, limit: int, model_name: str, eos_ids: list[int]) -> Sampling:
    """The request's sampling options, every field checked (see the module docstring)."""
    check_fields(body, CHAT_FIELDS if chat else COMPLETION_FIELDS)
    if "model" not in body:
        raise RequestError(f"the request has no 'model'; this server serves {model_name!r}")
    if body.get("model") != model_name:
        raise RequestError(f"model {body.get('model')!r} is not served here; this server serves {model_name!r}",
                           status=404)
    n = number(body, "n", 1, integer=True)
    if not 1 <= n <= MAX_N:
        raise RequestError(f"'n' must be in [1, {MAX_N}], got {n}")
    temperature = float(number(body, "temperature", 1.0))
    if not 0 <= temperature <= 100:
        raise RequestError(f"'temperature' must be in [0, 100], got {temperature}")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**SEED_BITS):
        raise RequestError(f"'seed' must be an integer in [0, 2**{SEED_BITS}), got {seed!r}")
    stops = body.get("stop_token_ids") or []
    if not isinstance(stops, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in stops) or (
            not set(stops) <= set(eos_ids)):
        raise RequestError(f"'stop_token_ids' must be a subset of the model's stop ids {eos_ids}, got {stops!r}")
    stream = body.get("stream") or False
    options = body.get("stream_options") or {}
    if not isinstance(stream, bool) or not isinstance(options, dict) or set(options) - {"include_usage"}:
        raise RequestError("'stream' must be true or false, and 'stream_options' at most {\"include_usage\": bool}")
    return Sampling(n=n, seed=seed, temperature=temperature, max_tokens=_max_tokens(body, limit),
                    stop=_stop_strings(body), top_logprobs=_logprobs(body, chat), stream=stream,
                    include_usage=bool(options.get("include_usage")))


def chat_messages(body: dict[str, Any]) -> list[dict[str, str]]:
    """``messages`` as {role, content} text; content given as text parts is joined."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty list of {role, content} objects with string values")
    out = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestError(f"'messages[{index}]' must be a {{role, content}} object with a string role")
        if message.get("tool_calls") or message.get("role") == "tool":
            raise RequestError(f"'messages[{index}]' is a tool call or result: tool calling is not supported")
        content = message.get("content")
        if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" and isinstance(
                p.get("text"), str) for p in content):
            content = "".join(p["text"] for p in content)
        if not isinstance(content, str):
            raise RequestError(f"'messages[{index}].content' must be text (a string or text parts), got "
                               f"{str(content)[:100]}")
        check_text(message["role"] + content, f"'messages[{index}]'")
        out.append({"role": message["role"], "content": content})
    return out
