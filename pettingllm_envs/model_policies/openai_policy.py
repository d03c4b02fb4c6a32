"""A policy backed by any OpenAI-compatible chat completions endpoint, and its HTTP client.

vLLM (``vllm serve``), llama.cpp's server, SGLang, TGI and hosted APIs all speak
``POST {base_url}/chat/completions``. Only the standard library is used, so evaluating
against a server needs no extra dependency. Concurrency is bounded by whoever calls the
policy (the suite runs at most ``concurrency`` episodes at a time); the client
(:func:`post_json`, also what the trainer's server backend sends its completion requests
with) is thread-safe and retries transient failures with exponential back-off.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

#: HTTP statuses worth retrying: rate limits and server-side hiccups.
RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}


class EndpointError(RuntimeError):
    """The endpoint failed in a way that retrying did not fix."""


@dataclass
class OpenAIChatPolicy:
    """``(observation, agent, info) -> completion text`` through a chat completions endpoint.

    The env's chat messages (``info["messages"]``) are sent when present, else the
    observation as one user message. Usage (tokens) is accumulated in ``usage``.
    """

    base_url: str
    """Server root including ``/v1``, e.g. ``http://127.0.0.1:8000/v1``."""
    model: str
    """Model name as the server knows it."""
    api_key: str | None = None
    """Bearer token; defaults to ``$OPENAI_API_KEY`` when set."""
    temperature: float = 0.0
    max_tokens: int = 1024
    timeout: float = 120.0
    """Seconds per request."""
    retries: int = 3
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        if self.api_key is None:
            self.api_key = os.environ.get("OPENAI_API_KEY")

    def __call__(self, observation: str, agent: str, info: dict[str, Any]) -> str:
        messages = info.get("messages") or [{"role": "user", "content": str(observation)}]
        return self.complete(messages)

    def complete(self, messages: list[dict[str, str]]) -> str:
        payload = post_json(f"{self.base_url}/chat/completions", {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }, api_key=self.api_key, timeout=self.timeout, retries=self.retries)
        try:
            text = payload["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as error:
            raise EndpointError(f"{self.base_url}: unexpected response {str(payload)[:300]}") from error
        for key in self.usage:
            self.usage[key] += int((payload.get("usage") or {}).get(key, 0))
        return text


def post_json(url: str, body: dict[str, Any], *, api_key: str | None = None, timeout: float = 120.0,
              retries: int = 3) -> dict[str, Any]:
    """POST ``body`` as JSON to ``url`` and return the JSON object it answers.

    Retries (exponential back-off from 0.5 s) on connection failures, timeouts and the
    statuses in :data:`RETRYABLE_STATUS`; any other HTTP error, or an answer that is not a
    JSON object, is an :class:`EndpointError` naming the URL and what came back."""
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    delay = 0.5
    for attempt in range(retries + 1):
        request = urllib.request.Request(url, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
            break
        except urllib.error.HTTPError as error:
            if error.code not in RETRYABLE_STATUS or attempt == retries:
                detail = error.read()[:500].decode("utf-8", errors="replace")
                raise EndpointError(f"{url}: HTTP {error.code}: {detail}") from error
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            if attempt == retries:
                raise EndpointError(f"{url}: {error}") from error
        time.sleep(delay)
        delay *= 2
    try:
        payload = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:  # a proxy's HTML error page, a cut body
        raise EndpointError(f"{url}: the answer is not JSON: {raw[:300]!r}") from error
    if not isinstance(payload, dict):
        raise EndpointError(f"{url}: expected a JSON object, got {str(payload)[:300]}")
    return payload
