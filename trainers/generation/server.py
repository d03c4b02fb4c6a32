"""``pettingllm serve MODEL_DIR``: an OpenAI-compatible server on the in-process sampler.

It serves one Hugging Face causal LM folder (a base model, ``pettingllm tiny-model``'s, or a
full fine-tuning checkpoint's ``policies/<name>``) with the trainer's own sampler
(:func:`trainers.generation.transformers_backend.generate`: exact float64 inverse-CDF sampling, log-probs
after temperature scaling, the model's stop ids), for generation-only use (``pettingllm bench
--policy openai:NAME@http://HOST:PORT/v1``, ``generation_backend: openai``) and so that the
server backend is tested against a real server. Standard library HTTP only.

Endpoints (``/v1``):

* ``GET /v1/models``: the one model, under ``--served-model-name`` (default: MODEL_DIR as given,
  as ``vllm serve`` names it).
* ``POST /v1/completions``: ``prompt`` is text, token ids, or a list of either (text is the
  client's whole rendered prompt: its special-token strings become control tokens, as in
  vLLM; a client quoting untrusted text sends token ids or messages); ``n``,
  ``max_tokens`` (default 16, at most ``--max-new-tokens``), ``temperature`` (default 1; 0 is
  greedy), ``seed``, ``logprobs`` (the sampled token's log-prob after temperature scaling;
  ``top_logprobs`` are not computed and come back null), and vLLM's ``return_token_ids`` and
  ``return_tokens_as_token_ids``. Completions stop at the model's stop ids (tokenizer eos and
  the generation config's eos ids) and include the stop token; a request's own
  ``stop_token_ids`` must be a subset of those, and ``stop`` strings are refused (400), since
  neither could be honoured.
* ``POST /v1/chat/completions``: ``messages`` chat-templated as the trainer renders prompts
  (over-long ones lose the middle of their history, like the trainer's; a special-token string
  inside a message stays text, :mod:`trainers.models.chat_tokens`).

Seeds: completion ``i`` of a request with ``seed`` s draws from seed s for ``i = 0`` and from
``derive_seed(s, i)`` after, and a request without a seed gets a random one; a completion
depends on its prompt and seed only, never on which requests share its batch, so a client
that sends one request per completion with its own seed (:mod:`trainers.generation.openai_backend`)
gets exactly the in-process backend's samples. Concurrent requests are batched: the sampling
thread takes whatever arrived within ``--batch-wait-ms`` of the first (up to ``--max-batch``
completions) into one batched call.

A malformed request is a 400 with an OpenAI-style ``{"error": {"message": ...}}`` naming the
field; an unknown model name a 404.
"""

from __future__ import annotations

import argparse
import json
import queue
import secrets
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pettingllm_envs.cli.errors import ArgumentParser
from trainers.generation.protocol import Generation
from trainers.maths.seeding import SEED_BITS, derive_seed

#: OpenAI's default completion budget when a request names none.
DEFAULT_MAX_TOKENS = 16
#: Most completions one request may ask for (``n`` times its number of prompts): the one sampling
#: thread serves requests in turn, so a bigger request would hold every other client up.
MAX_N = 128
#: Largest request body read (a full batch of the longest prompts as token ids fits many times over).
MAX_BODY_BYTES = 32 * 2**20
#: Seconds a connection may take to send its request: a client that announces more body than
#: it sends gets a 408 instead of holding a thread open forever.
REQUEST_TIMEOUT_S = 60.0


class RequestError(ValueError):
    """A request the server cannot answer; ``status`` is the HTTP status it gets."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _Job:
    prompt: list[int]
    seed: int
    temperature: float
    max_tokens: int
    result: Future[Generation] = field(default_factory=Future)


def completion_seeds(seed: int | None, n: int) -> list[int]:
    """The seed of each of a request's ``n`` completions (see the module docstring)."""
    base = secrets.randbits(SEED_BITS) if seed is None else seed
    return [base if i == 0 else derive_seed(base, i) for i in range(n)]


def _number(body: dict[str, Any], name: str, default: float, *, integer: bool = False) -> Any:
    value = body.get(name, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
        raise RequestError(f"{name!r} must be {'an integer' if integer else 'a number'}, got {value!r}")
    return value


def _check_text(text: str, what: str) -> None:
    """JSON may carry lone surrogates (``"\\ud800"``), which no tokenizer can encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise RequestError(f"{what} is not valid Unicode text ({error.reason} at position {error.start})") from None


class PolicyServer:
    """The server of one model (see the module docstring): ``with PolicyServer(policies) as server:
    server.base_url``; :meth:`serve_forever` for the command."""

    def __init__(self, policies: Any, *, model_name: str, policy: str = "shared", host: str = "127.0.0.1",
                 port: int = 0, max_new_tokens: int = 1024, max_batch: int = 64, batch_wait: float = 0.005) -> None:
        self.policies, self.policy, self.model_name = policies, policy, model_name
        self.max_new_tokens, self.max_batch, self.batch_wait = max_new_tokens, max_batch, batch_wait
        with policies.active(policy) as model:
            self.vocab_size = model.get_input_embeddings().num_embeddings
        # The tokenizer is not safe for concurrent use: the request threads encode and the
        # sampling thread decodes under this lock.
        self._tokenizer_lock = threading.Lock()
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._sampler = threading.Thread(target=self._sample_loop, name="policy-server-sampler", daemon=True)
        handler = type("Handler", (_Handler,), {"server_state": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        host_name, bound_port = self.httpd.server_address[:2]
        self.base_url = f"http://{host_name}:{bound_port}/v1"
        self._http = threading.Thread(target=self.httpd.serve_forever, name="policy-server-http", daemon=True)

    # ------------------------------------------------------------ lifecycle
    def start(self) -> PolicyServer:
        self._sampler.start()
        self._http.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._jobs.put(None)
        self._sampler.join()

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Serve until interrupted (Ctrl-C)."""
        self.start()
        try:
            while self._http.is_alive():
                self._http.join(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    # -------------------------------------------------------------- sampling
    def _sample_loop(self) -> None:
        while True:
            first = self._jobs.get()
            if first is None:
                return
            jobs = [first]
            deadline = time.monotonic() + self.batch_wait
            stopping = False
            while len(jobs) < self.max_batch:
                try:
                    job = self._jobs.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if job is None:
                    stopping = True
                    break
                jobs.append(job)
            groups: dict[tuple[float, int], list[_Job]] = {}
            for job in jobs:
                groups.setdefault((job.temperature, job.max_tokens), []).append(job)
            for (temperature, max_tokens), group in groups.items():
                self._run(group, temperature, max_tokens)
            if stopping:
                return

    def _run(self, group: Sequence[_Job], temperature: float, max_tokens: int) -> None:
        # imported here, not with the module: building the command's parser needs no torch
        from trainers.generation.transformers_backend import generate

        try:
            with self._tokenizer_lock:
                generations = generate(self.policies, self.policy, [j.prompt for j in group], 1,
                                       seeds=[j.seed for j in group], temperature=temperature,
                                       max_new_tokens=max_tokens)
        except Exception as error:  # the requests of this batch get a 500 naming it; the server goes on
            for job in group:
                job.result.set_exception(error)
            return
        for job, generation in zip(group, generations, strict=True):
            job.result.set_result(generation)

    def sample(self, prompts: Sequence[list[int]], n: int, *, seed: int | None, temperature: float,
               max_tokens: int) -> list[Generation]:
        """``n`` completions of every prompt (prompt-major), through the batching thread."""
        jobs = [_Job(prompt, s, temperature, max_tokens) for prompt in prompts for s in completion_seeds(seed, n)]
        for job in jobs:
            self._jobs.put(job)
        return [job.result.result() for job in jobs]

    # -------------------------------------------------------------- requests
    def _sampling_fields(self, body: dict[str, Any]) -> dict[str, Any]:
        n = _number(body, "n", 1, integer=True)
        if not 1 <= n <= MAX_N:
            raise RequestError(f"'n' must be in [1, {MAX_N}], got {n}")
        max_tokens = _number(body, "max_tokens", DEFAULT_MAX_TOKENS, integer=True)
        if not 1 <= max_tokens <= self.max_new_tokens:
            raise RequestError(f"'max_tokens' must be in [1, {self.max_new_tokens}] (--max-new-tokens), "
                               f"got {max_tokens}")
        temperature = float(_number(body, "temperature", 1.0))
        if not 0 <= temperature <= 100:
            raise RequestError(f"'temperature' must be in [0, 100], got {temperature}")
        seed = body.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**SEED_BITS):
            raise RequestError(f"'seed' must be an integer in [0, 2**{SEED_BITS}), got {seed!r}")
        if body.get("stop"):
            raise RequestError("'stop' strings are not supported: completions end at the model's stop ids")
        stops = body.get("stop_token_ids") or []
        if not isinstance(stops, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in stops) or (
                not set(stops) <= set(self.policies.eos_ids)):
            raise RequestError(f"'stop_token_ids' must be a subset of the model's stop ids {self.policies.eos_ids}, "
                               f"got {stops!r}")
        if "model" not in body:
            raise RequestError(f"the request has no 'model'; this server serves {self.model_name!r}")
        if body.get("model") != self.model_name:
            raise RequestError(f"model {body.get('model')!r} is not served here; this server serves "
                               f"{self.model_name!r}", status=404)
        return {"n": n, "seed": seed, "temperature": temperature, "max_tokens": max_tokens}

    def _prompt_ids(self, prompt: Any) -> list[list[int]]:
        """The token ids of each prompt of a completions request."""
        if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and isinstance(prompt[0], int)):
            prompt = [prompt]
        if not isinstance(prompt, list) or not prompt:
            raise RequestError("'prompt' must be text, token ids, or a non-empty list of either")
        out = []
        for item in prompt:
            if isinstance(item, str):
                _check_text(item, "a prompt")
                with self._tokenizer_lock:
                    ids = list(self.policies.tokenizer(item)["input_ids"])
            elif isinstance(item, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in item):
                ids = item
            else:
                raise RequestError(f"a prompt must be text or a list of token ids, got {str(item)[:100]}")
            if not ids:
                raise RequestError("a prompt is empty")
            if not all(0 <= i < self.vocab_size for i in ids):
                raise RequestError(f"prompt token ids must be in [0, {self.vocab_size})")
            if len(ids) > self.policies.max_prompt_tokens:
                raise RequestError(f"a prompt of {len(ids)} tokens is over the {self.policies.max_prompt_tokens}"
                                   " tokens this server takes (--max-prompt-tokens)")
            out.append(ids)
        return out

    def _finish(self, generation: Generation) -> str:
        ids = generation.completion_ids
        return "stop" if ids and ids[-1] in self.policies.eos_ids else "length"

    def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        fields = self._sampling_fields(body)
        prompts = self._prompt_ids(body.get("prompt"))
        logprobs = body.get("logprobs")
        if logprobs is not None and (isinstance(logprobs, bool) or not isinstance(logprobs, int) or logprobs < 0):
            raise RequestError(f"'logprobs' must be a non-negative integer, got {logprobs!r}")
        as_ids, with_ids = bool(body.get("return_tokens_as_token_ids")), bool(body.get("return_token_ids"))
        n = fields.pop("n")
        if n * len(prompts) > MAX_N:
            raise RequestError(f"a request may ask for at most {MAX_N} completions ('n' times the number of "
                               f"prompts), got {n} x {len(prompts)}")
        generations = self.sample(prompts, n, **fields)
        choices = []
        for index, generation in enumerate(generations):
            choice: dict[str, Any] = {"index": index, "text": generation.text,
                                      "finish_reason": self._finish(generation), "logprobs": None}
            if logprobs is not None:
                with self._tokenizer_lock:
                    tokens = [f"token_id:{t}" if as_ids else self.policies.tokenizer.decode([t])
                              for t in generation.completion_ids]
                choice["logprobs"] = {"tokens": tokens, "token_logprobs": generation.logprobs, "top_logprobs": None,
                                      "text_offset": None}
            if with_ids:
                choice["token_ids"] = generation.completion_ids
                choice["prompt_token_ids"] = generation.prompt_ids
            choices.append(choice)
        return self._response("text_completion", choices, prompts, n, generations)

    def chat_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        fields = self._sampling_fields(body)
        messages = body.get("messages")
        if not (isinstance(messages, list) and messages and all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in messages)):
            raise RequestError("'messages' must be a non-empty list of {role, content} objects with string values")
        if body.get("logprobs"):
            raise RequestError("chat log-probs are not served; use /v1/completions with 'logprobs'")
        for message in messages:
            _check_text(message["role"] + message["content"], "a message")
        with self._tokenizer_lock:
            prompt = self.policies.encode_prompt([{"role": m["role"], "content": m["content"]} for m in messages]).ids
        n = fields.pop("n")
        generations = self.sample([prompt], n, **fields)
        choices = [{"index": i, "message": {"role": "assistant", "content": g.text}, "finish_reason": self._finish(g)}
                   for i, g in enumerate(generations)]
        return self._response("chat.completion", choices, [prompt], n, generations)

    def _response(self, kind: str, choices: list[dict[str, Any]], prompts: Sequence[Sequence[int]], n: int,
                  generations: Sequence[Generation]) -> dict[str, Any]:
        completion_tokens = sum(len(g.completion_ids) for g in generations)
        prompt_tokens = sum(len(p) for p in prompts)
        return {"id": f"pettingllm-{secrets.token_hex(8)}", "object": kind, "created": int(time.time()),
                "model": self.model_name, "choices": choices,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model_name, "object": "model", "owned_by": "pettingllm"}]}


class _Handler(BaseHTTPRequestHandler):
    server_state: PolicyServer
    timeout = REQUEST_TIMEOUT_S  # socket timeout of every read and write of the connection

    def log_message(self, *args: Any) -> None:  # no line per request on stderr
        pass

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        kind = "invalid_request_error" if status < 500 else "server_error"
        self._send(status, {"error": {"message": message, "type": kind, "code": status}})

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, self.server_state.models())
        else:
            self._error(404, f"no such endpoint: GET {self.path}")

    def do_POST(self) -> None:
        routes = {"/v1/completions": self.server_state.completions,
                  "/v1/chat/completions": self.server_state.chat_completions}
        route = routes.get(self.path.rstrip("/"))
        if route is None:
            self._error(404, f"no such endpoint: POST {self.path}")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY_BYTES:
            self._error(413 if length > MAX_BODY_BYTES else 400,
                        f"the Content-Length must be a byte count in [0, {MAX_BODY_BYTES}]")
            return
        try:
            body = json.loads(self.rfile.read(length)) if length else None
        except TimeoutError:
            self._error(408, f"the request body did not arrive within {self.timeout:g} s")
            return
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nesting too deep to decode
            self._error(400, "the request body is not JSON")
            return
        if not isinstance(body, dict):
            self._error(400, "the request body must be a JSON object")
            return
        try:
            self._send(200, route(body))
        except RequestError as error:
            self._error(error.status, str(error))
        except Exception as error:  # a failed batch: the client gets the reason, the server goes on
            self._error(500, f"{type(error).__name__}: {error}")


# ---------------------------------------------------------------------- command
def build_parser(prog: str = "pettingllm serve") -> argparse.ArgumentParser:
    """The options of ``pettingllm serve``."""
    parser = ArgumentParser(prog=prog, description="Serve a causal LM folder with the trainer's sampler behind an "
                            "OpenAI-compatible API (/v1/completions, /v1/chat/completions, /v1/models).")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``pettingllm serve MODEL [--port P] ...``: serve until Ctrl-C."""
    from pettingllm_envs.cli.checks import check_at_least, check_model
    from trainers.models.policy_set import PolicySet
    from trainers.models.spec import ModelSpec

    args = build_parser().parse_args(argv)
    check_model(args.model, option="MODEL")  # the positional argument, not an option
    for option, value in (("--max-new-tokens", args.max_new_tokens), ("--max-prompt-tokens", args.max_prompt_tokens),
                          ("--max-batch", args.max_batch)):
        check_at_least(option, value, 1)
    check_at_least("--port", args.port, 0)
    spec = ModelSpec(model=args.model, device=args.device, dtype=args.dtype, max_new_tokens=args.max_new_tokens,
                     max_prompt_tokens=args.max_prompt_tokens)
    policies = PolicySet(spec, {"assistant": "shared"})
    server = PolicyServer(policies, model_name=args.served_model_name or args.model, host=args.host, port=args.port,
                          max_new_tokens=args.max_new_tokens, max_batch=args.max_batch,
                          batch_wait=args.batch_wait_ms / 1000)
    print(f"[serve] {args.model} as {server.model_name!r} at {server.base_url} (Ctrl-C stops)", file=sys.stderr)
    server.serve_forever()
    return 0

