"""The HTTP side of ``pettingllm serve`` (:mod:`trainers.generation.server`): FastAPI routes that
read and check a request, queue its completions on the sampling thread
(:mod:`trainers.generation.server_engine`), and answer with one body or a stream of server-sent
events. While a request waits, the route checks every :data:`DISCONNECT_POLL_S` whether its
client is still there; when it is gone, its completions are cancelled and the sampler drops them
at the next token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from trainers.generation import server_responses as answers
from trainers.generation.protocol import Generation
from trainers.generation.server_engine import DoneEvent, Engine, ErrorEvent, Event, Job, QueueFull, Stopped, TokenEvent
from trainers.generation.server_requests import MAX_N, RequestError, Sampling, chat_messages, completion_seeds, sampling

#: Largest request body read (a full batch of the longest prompts as token ids fits many times over).
MAX_BODY_BYTES = 32 * 2**20
#: How often a waiting request checks that its client is still connected.
DISCONNECT_POLL_S = 0.1


class PolicyServer(Protocol):
    """What the routes use of :class:`trainers.generation.server.PolicyServer`."""

    engine: Engine
    policies: Any
    model_name: str
    max_new_tokens: int
    request_timeout: float

    def prompt_ids(self, prompt: Any) -> list[list[int]]: ...

    def chat_prompt(self, messages: list[dict[str, str]]) -> list[int]: ...

    def models(self) -> dict[str, Any]: ...


class ClientGone(Exception):
    """The client disconnected before its answer was ready."""


def error(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse(answers.error_body(status, message), status_code=status, headers=headers or None)


async def read_body(request: Request, timeout: float) -> dict[str, Any]:
    """The request's JSON object, its size checked before it is read."""
    announced = request.headers.get("content-length")
    try:
        length = int(announced) if announced is not None else 0
    except ValueError:
        length = -1
    if not 0 <= length <= MAX_BODY_BYTES:
        raise RequestError(f"the Content-Length must be a byte count in [0, {MAX_BODY_BYTES}]",
                           status=413 if length > MAX_BODY_BYTES else 400)
    try:
        data = await asyncio.wait_for(request.body(), timeout)
    except TimeoutError:
        raise RequestError(f"the request body did not arrive within {timeout:g} s", status=408) from None
    try:
        body = json.loads(data) if data else None
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nesting too deep to decode
        raise RequestError("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    return body


async def next_event(request: Request, events: asyncio.Queue[Event]) -> Event:
    """The next event of a request's completions; :class:`ClientGone` when its client left first."""
    while True:
        try:
            return await asyncio.wait_for(events.get(), DISCONNECT_POLL_S)
        except TimeoutError:
            if await request.is_disconnected():
                raise ClientGone() from None


def queue_jobs(server: PolicyServer, prompts: Sequence[list[int]], options: Sampling) -> tuple[
        list[Job], asyncio.Queue[Event]]:
    """One job per completion (prompt-major), queued; their events arrive on the returned queue."""
    if options.n * len(prompts) > MAX_N:
        raise RequestError(f"a request may ask for at most {MAX_N} completions ('n' times the number of prompts), "
                           f"got {options.n} x {len(prompts)}")
    loop, events = asyncio.get_running_loop(), asyncio.Queue[Event]()

    def deliver(event: Event) -> None:
        with contextlib.suppress(RuntimeError):  # the server's loop has closed: nobody is waiting
            loop.call_soon_threadsafe(events.put_nowait, event)

    jobs = [Job(i * options.n + k, prompt, seed, options, deliver)
            for i, prompt in enumerate(prompts) for k, seed in enumerate(completion_seeds(options.seed, options.n))]
    server.engine.submit(jobs)
    return jobs, events


async def collect(request: Request, jobs: Sequence[Job], events: asyncio.Queue[Event]) -> list[DoneEvent]:
    """Every completion of a request, in order; cancels them all if the client leaves."""
    done: dict[int, DoneEvent] = {}
    try:
        while len(done) < len(jobs):
            event = await next_event(request, events)
            if isinstance(event, ErrorEvent):
                raise event.error
            if isinstance(event, DoneEvent):
                done[event.index] = event
    finally:
        for job in jobs:
            job.cancel()  # a no-op for the finished ones
    return [done[i] for i in range(len(jobs))]


async def stream(request: Request, jobs: Sequence[Job], events: asyncio.Queue[Event], options: Sampling,
                 chunk: Callable[..., dict[str, Any]], prompts: Sequence[Sequence[int]],
                 first: Sequence[dict[str, Any]] = ()) -> AsyncIterator[str]:
    """The server-sent events of a streamed request (:mod:`trainers.generation.server_responses`)."""
    generations: list[Generation] = []
    try:
        for payload in first:
            yield answers.sse(payload)
        while len(generations) < len(jobs):
            event = await next_event(request, events)
            if isinstance(event, ErrorEvent):
                yield answers.sse(answers.error_body(500, f"{type(event.error).__name__}: {event.error}"))
                return
            if isinstance(event, TokenEvent) and (event.text or event.logprob is not None):
                yield answers.sse(chunk(event.index, text=event.text,
                                        logprobs=None if event.logprob is None else [event.logprob]))
            elif isinstance(event, DoneEvent):
                generations.append(event.generation)
                yield answers.sse(chunk(event.index, reason=event.finish_reason))
        if options.include_usage:
            yield answers.sse({**chunk(0), "choices": [], "usage": answers.usage(prompts, generations)})
        yield answers.sse("[DONE]")
    except ClientGone:
        return
    finally:
        for job in jobs:
            job.cancel()


async def generate(server: PolicyServer, request: Request, *, chat: bool) -> Response:
    body = await read_body(request, server.request_timeout)
    options = sampling(body, chat=chat, limit=server.max_new_tokens, model_name=server.model_name,
                       eos_ids=list(server.policies.eos_ids))
    if chat:
        prompts = [await run_in_threadpool(server.chat_prompt, chat_messages(body))]
    else:
        prompts = await run_in_threadpool(server.prompt_ids, body.get("prompt"))
    as_ids, with_ids = bool(body.get("return_tokens_as_token_ids")), bool(body.get("return_token_ids"))
    jobs, events = queue_jobs(server, prompts, options)
    head = answers.envelope("chat.completion.chunk" if chat else "text_completion", server.model_name)
    if options.stream:
        if chat:
            chunk: Callable[..., dict[str, Any]] = lambda index, **kw: answers.chat_chunk(head, index, **kw)  # noqa: E731
            first = [answers.chat_chunk(head, i, role=True) for i in range(len(jobs))]
        else:
            chunk, first = (lambda index, **kw: answers.completion_chunk(head, index, as_ids=as_ids, **kw)), []
        return StreamingResponse(stream(request, jobs, events, options, chunk, prompts, first),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
    done = await collect(request, jobs, events)
    if chat:
        choices = [answers.chat_choice(d.index, d.generation, d.finish_reason, d.logprobs) for d in done]
    else:
        choices = [answers.completion_choice(d.index, d.generation, d.finish_reason, d.logprobs, as_ids=as_ids,
                                             with_ids=with_ids) for d in done]
    kind = "chat.completion" if chat else "text_completion"
    return JSONResponse({**answers.envelope(kind, server.model_name, head["id"]), "choices": choices,
                         "usage": answers.usage(prompts, [d.generation for d in done])})


def metrics_text(server: PolicyServer) -> str:
    engine = server.engine
    lines = [f"pettingllm_serve_queue_completions {engine.pending}", f"pettingllm_serve_running_completions "
             f"{engine.running}", f"pettingllm_serve_queue_limit {engine.max_queue}"]
    lines += [f"pettingllm_serve_{name}_total {value}" for name, value in engine.counters.items()]
    return "\n".join(lines) + "\n"


def build_app(server: PolicyServer) -> FastAPI:
    """The routes of ``server`` (see :mod:`trainers.generation.server`)."""
    app = FastAPI(title="pettingllm serve", docs_url=None, redoc_url=None, openapi_url=None)

    async def answer(request: Request, chat: bool) -> Response:
        try:
            return await generate(server, request, chat=chat)
        except RequestError as failure:
            return error(failure.status, str(failure))
        except QueueFull as failure:
            return error(429, str(failure), **{"Retry-After": "1"})
        except Stopped as failure:
            return error(503, str(failure))
        except ClientGone:
            return Response(status_code=499)  # nobody reads it: the client has gone
        except Exception as failure:  # a failed batch: the client gets the reason, the server goes on
            return error(500, f"{type(failure).__name__}: {failure}")

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await answer(request, True)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await answer(request, False)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return server.models()

    @app.get("/health")
    async def health() -> Response:
        if not server.engine.alive:
            return error(503, "the sampler is not running")
        return JSONResponse({"status": "ok", "queued_completions": server.engine.pending})

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(metrics_text(server))

    @app.exception_handler(404)
    async def not_found(request: Request, exc: Exception) -> Response:
        return error(404, f"no such endpoint: {request.method} {request.url.path}")

    @app.exception_handler(405)
    async def wrong_method(request: Request, exc: Exception) -> Response:
        return error(405, f"no such endpoint: {request.method} {request.url.path}")

    return app
