"""``pettingllm serve MODEL_DIR``: an OpenAI-compatible server on the in-process sampler.

It serves one Hugging Face causal LM folder (a base model, ``pettingllm tiny-model``'s, or a
full fine-tuning checkpoint's ``policies/<name>``) with the trainer's own sampler
(:func:`trainers.generation.transformers_backend.generate`: exact float64 inverse-CDF sampling, log-probs
after temperature scaling, the model's stop ids), for generation-only use (``pettingllm bench
--policy openai:NAME@http://HOST:PORT/v1``, ``generation_backend: openai``, the ``openai``
client) and so that the server backend is tested against a real server. FastAPI on uvicorn.

Endpoints:

* ``GET /v1/models``: the one model, under ``--served-model-name`` (default: MODEL_DIR as given,
  as ``vllm serve`` names it).
* ``POST /v1/chat/completions``: ``messages`` chat-templated as the trainer renders prompts
  (over-long ones lose the middle of their history, like the trainer's; a special-token string
  inside a message stays text, :mod:`trainers.models.chat_tokens`).
* ``POST /v1/completions``: ``prompt`` is text, token ids, or a list of either (text is the
  client's whole rendered prompt: its special-token strings become control tokens, as in
  vLLM; a client quoting untrusted text sends token ids or messages), with vLLM's
  ``return_token_ids`` and ``return_tokens_as_token_ids``.
* ``GET /health`` (200, or 503 when the sampler is not running) and ``GET /metrics``
  (Prometheus text: queue depth, completions, tokens, cancelled and rejected requests).

Both generation endpoints take ``stream`` (server-sent events, one chunk per token), ``n``,
``max_tokens`` or ``max_completion_tokens`` (default 16, at most ``--max-new-tokens``),
``temperature`` (default 1; 0 is greedy), ``seed``, ``stop`` (up to 4 strings: the text ends
before the first one), ``stop_token_ids`` (a subset of the model's stop ids) and log-probs as the
OpenAI API defines them (chat: ``logprobs`` and ``top_logprobs``; completions: ``logprobs``
alternatives), after temperature scaling. Completions stop at the model's stop ids and include
the stop token. What the sampler cannot do (``tools``, ``response_format``, ``top_p`` other than
1, ...) is a 400 naming the field (:mod:`trainers.generation.server_requests`).

Seeds: completion ``i`` of a request with ``seed`` s draws from seed s for ``i = 0`` and from
``derive_seed(s, i)`` after, and a request without a seed gets a random one; a completion
depends on its prompt and seed only, never on which requests share its batch, so a client
that sends one request per completion with its own seed (:mod:`trainers.generation.openai_backend`)
gets exactly the in-process backend's samples, streamed or not.

Load: requests are batched by the sampling thread (:mod:`trainers.generation.server_engine`);
at most ``--max-queue`` completions wait or run, a request beyond that is a 429. A client that
disconnects has its completions cancelled at the next token. A malformed request is a 400 with
an OpenAI-style ``{"error": {"message": ...}}``; an unknown model name a 404.
"""

from __future__ import annotations

import argparse
import copy
import socket
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pettingllm_envs.commandline.errors import ArgumentParser
from trainers.generation.server_requests import MAX_N, RequestError, check_text, completion_seeds

if TYPE_CHECKING:
    from trainers.generation.server_engine import Engine

#: Seconds a connection may take to send its request body: a client that announces more body than
#: it sends gets a 408 instead of holding a request open forever.
REQUEST_TIMEOUT_S = 60.0
__all__ = ["MAX_N", "REQUEST_TIMEOUT_S", "PolicyServer", "RequestError", "build_parser", "completion_seeds", "main"]


class PolicyServer:
    """The server of one model (see the module docstring): ``with PolicyServer(policies) as server:
    server.base_url``; :meth:`serve_forever` for the command."""

    def __init__(self, policies: Any, *, model_name: str, policy: str = "shared", host: str = "127.0.0.1",
                 port: int = 0, max_new_tokens: int = 1024, max_batch: int = 64, batch_wait: float = 0.005,
                 max_queue: int = 256, request_timeout: float = REQUEST_TIMEOUT_S) -> None:
        # imported here, not with the module: the command's parser needs neither torch nor the server stack
        import uvicorn

        from trainers.generation.server_app import build_app
        from trainers.generation.server_engine import Engine
        from trainers.models.prompts import PromptEncoder

        self.policies, self.model_name, self.max_new_tokens = policies, model_name, max_new_tokens
        self.request_timeout = request_timeout
        with policies.active(policy) as model:
            self.vocab_size = model.get_input_embeddings().num_embeddings
        self.engine: Engine = Engine(policies, policy, max_batch=max_batch, batch_wait=batch_wait, max_queue=max_queue)
        # the sampling thread owns the policies' tokenizer; requests are encoded with a copy of it
        self.encoder = PromptEncoder(copy.deepcopy(policies.tokenizer), policies.generation_config,
                                     policies.max_prompt_tokens)
        self._encode_lock = threading.Lock()
        self.socket = socket.create_server((host, port))
        self.address: tuple[str, int] = self.socket.getsockname()[:2]
        self.base_url = f"http://{self.address[0]}:{self.address[1]}/v1"
        config = uvicorn.Config(build_app(self), log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        self.uvicorn = uvicorn.Server(config)
        self._http = threading.Thread(target=self.uvicorn.run, kwargs={"sockets": [self.socket]},
                                      name="policy-server-http", daemon=True)

    # ------------------------------------------------------------ lifecycle
    def start(self) -> PolicyServer:
        self.engine.start()
        self._http.start()
        while not self.uvicorn.started and self._http.is_alive():
            self._http.join(0.01)
        return self

    def stop(self) -> None:
        self.uvicorn.should_exit = True
        if self._http.is_alive():
            self._http.join()
        self.socket.close()
        self.engine.stop()

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Serve until interrupted (Ctrl-C): uvicorn handles the signal in the main thread."""
        self.engine.start()
        try:
            self.uvicorn.run(sockets=[self.socket])
        except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it shut down on: a clean stop
            pass
        finally:
            self.socket.close()
            self.engine.stop()

    # ----------------------------------------------------------- encoding
    def prompt_ids(self, prompt: Any) -> list[list[int]]:
        """The token ids of each prompt of a completions request."""
        if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and isinstance(prompt[0], int)):
            prompt = [prompt]
        if not isinstance(prompt, list) or not prompt:
            raise RequestError("'prompt' must be text, token ids, or a non-empty list of either")
        out = []
        for item in prompt:
            if isinstance(item, str):
                check_text(item, "a prompt")
                with self._encode_lock:
                    ids = list(self.encoder.tokenizer(item)["input_ids"])
            elif isinstance(item, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in item):
                ids = item
            else:
                raise RequestError(f"a prompt must be text or a list of token ids, got {str(item)[:100]}")
            if not ids:
                raise RequestError("a prompt is empty")
            if not all(0 <= i < self.vocab_size for i in ids):
                raise RequestError(f"prompt token ids must be in [0, {self.vocab_size})")
            if len(ids) > self.encoder.max_prompt_tokens:
                raise RequestError(f"a prompt of {len(ids)} tokens is over the {self.encoder.max_prompt_tokens}"
                                   " tokens this server takes (--max-prompt-tokens)")
            out.append(ids)
        return out

    def chat_prompt(self, messages: list[dict[str, str]]) -> list[int]:
        with self._encode_lock:
            return list(self.encoder.encode_prompt(messages).ids)

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model_name, "object": "model", "owned_by": "pettingllm"}]}


# ---------------------------------------------------------------------- command
def build_parser(prog: str = "pettingllm serve") -> argparse.ArgumentParser:
    """The options of ``pettingllm serve``."""
    parser = ArgumentParser(prog=prog, description="Serve a causal LM folder with the trainer's sampler behind an "
                            "OpenAI-compatible API (/v1/completions, /v1/chat/completions, /v1/models; streaming; "
                            "/health, /metrics).")
    parser.add_argument("model", help="a local Hugging Face causal LM folder (a full model, not a LoRA adapter)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, loopback)")
    parser.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 picks a free one)")
    parser.add_argument("--served-model-name", help="the name clients use (default: MODEL as given)")
    parser.add_argument("--max-new-tokens", type=int, default=1024, help="largest max_tokens a request may ask "
                        "(default: 1024)")
    parser.add_argument("--max-prompt-tokens", type=int, default=4096, help="longest prompt taken (default: 4096)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda[:i] (default: auto)")
    parser.add_argument("--dtype", default="float32", help="compute dtype: float32, bfloat16 (default: float32)")
    parser.add_argument("--max-batch", type=int, default=64, help="most completions sampled in one batch (default: 64)")
    parser.add_argument("--batch-wait-ms", type=float, default=5.0, help="how long the first request of a batch "
                        "waits for others (default: 5)")
    parser.add_argument("--max-queue", type=int, default=256, help="most completions waiting or running; a request "
                        "beyond it gets a 429 (default: 256)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``pettingllm serve MODEL [--port P] ...``: serve until Ctrl-C."""
    from pettingllm_envs.commandline.checks import check_at_least, check_model
    from trainers.models.policy_set import PolicySet
    from trainers.models.spec import ModelSpec

    args = build_parser().parse_args(argv)
    check_model(args.model, option="MODEL")  # the positional argument, not an option
    for option, value in (("--max-new-tokens", args.max_new_tokens), ("--max-prompt-tokens", args.max_prompt_tokens),
                          ("--max-batch", args.max_batch), ("--max-queue", args.max_queue)):
        check_at_least(option, value, 1)
    check_at_least("--port", args.port, 0)
    spec = ModelSpec(model=args.model, device=args.device, dtype=args.dtype, max_new_tokens=args.max_new_tokens,
                     max_prompt_tokens=args.max_prompt_tokens)
    policies = PolicySet(spec, {"assistant": "shared"})
    server = PolicyServer(policies, model_name=args.served_model_name or args.model, host=args.host, port=args.port,
                          max_new_tokens=args.max_new_tokens, max_batch=args.max_batch,
                          batch_wait=args.batch_wait_ms / 1000, max_queue=args.max_queue)
    print(f"[serve] {args.model} as {server.model_name!r} at {server.base_url} (Ctrl-C stops)", file=sys.stderr,
          flush=True)
    server.serve_forever()
    return 0
