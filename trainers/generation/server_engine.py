"""The sampling side of ``pettingllm serve``: one thread runs the in-process sampler on batches of
queued completions and reports every token as it is drawn.

A request becomes one :class:`Job` per completion. The sampling thread takes whatever jobs arrived
within ``batch_wait`` of the first (up to ``max_batch``), groups them by temperature, and samples
each group with :func:`trainers.generation.transformers_backend.generate`, whose per-step hook
decides, token by token, which completions end: at a stop id, at a stop string (the text is cut
before it, as the OpenAI API has it), at the completion's own ``max_tokens``, or when its client
has gone (:meth:`Job.cancel`). A batch whose clients have all gone ends at the next token, so
an abandoned request frees the sampler within one decode step. Streaming completions get a
:class:`TokenEvent` per token, their text deltas held back while they could still be the start
of a stop string or of an unfinished UTF-8 character, so the deltas add up to the final text.

The queue is bounded (``max_queue`` completions waiting or running): :meth:`Engine.submit` raises
:class:`QueueFull` instead of letting clients wait without end. The tokenizer is used by this
thread only (request-side encoding has its own copy).
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainers.generation.protocol import Generation
from trainers.generation.server_requests import Sampling

if TYPE_CHECKING:
    import torch


class QueueFull(RuntimeError):
    """The bounded queue has no room for a request's completions (HTTP 429)."""


class Stopped(RuntimeError):
    """The engine is not running (HTTP 503)."""


@dataclass(frozen=True)
class TokenLogprob:
    """A drawn token, its text piece and log-prob, and the most likely alternatives (id, piece, log-prob)."""

    token_id: int
    piece: str
    logprob: float
    top: list[tuple[int, str, float]]


@dataclass(frozen=True)
class TokenEvent:
    """One drawn token of a streaming completion."""

    index: int
    text: str
    """The text this token adds (may be empty while held back)."""
    logprob: TokenLogprob | None


@dataclass(frozen=True)
class DoneEvent:
    """A finished completion: its generation (text cut at a stop string), why it ended, and its
    tokens' log-probs when the request asked for them."""

    index: int
    generation: Generation
    finish_reason: str
    logprobs: list[TokenLogprob] | None


@dataclass(frozen=True)
class ErrorEvent:
    index: int
    error: BaseException


Event = TokenEvent | DoneEvent | ErrorEvent


@dataclass
class Job:
    """One completion: its prompt, seed and sampling options, and where its events go."""

    index: int
    prompt: list[int]
    seed: int
    sampling: Sampling
    deliver: Callable[[Event], None]
    cancelled: threading.Event = field(default_factory=threading.Event)
    ids: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    sent: str = ""
    text: str | None = None
    end: str | None = None

    def cancel(self) -> None:
        self.cancelled.set()


def held_back(text: str, stops: Sequence[str]) -> int:
    """How many characters at the end of ``text`` may not be streamed yet: an unfinished UTF-8
    character (decoded as U+FFFD) or the start of a stop string."""
    hold = len(text) - len(text.rstrip("\ufffd"))
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:size]):
                hold = max(hold, size)
                break
    return hold


class Engine:
    """The sampling thread and its bounded queue (see the module docstring)."""

    def __init__(self, policies: Any, policy: str, *, max_batch: int, batch_wait: float, max_queue: int) -> None:
        self.policies, self.policy = policies, policy
        self.max_batch, self.batch_wait, self.max_queue = max_batch, batch_wait, max_queue
        self.eos_ids = frozenset(policies.eos_ids)
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self.pending = 0  # completions queued or running
        self.running = 0
        self.counters = {"completions": 0, "tokens": 0, "cancelled": 0, "rejected": 0, "batches": 0}
        self._pieces: dict[int, str] = {}
        self._thread = threading.Thread(target=self._loop, name="policy-server-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._jobs.put(None)
        self._thread.join()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, jobs: Sequence[Job]) -> None:
        """Queue a request's completions, all or none."""
        with self._lock:
            if not self.alive:
                raise Stopped("the server is not sampling (stopped or failed); try again later")
            if self.pending + len(jobs) > self.max_queue:
                self.counters["rejected"] += 1
                raise QueueFull(f"the queue is full ({self.pending} of {self.max_queue} completions waiting or "
                                f"running; --max-queue): retry later")
            self.pending += len(jobs)
        for job in jobs:
            self._jobs.put(job)

    def _release(self, count: int) -> None:
        with self._lock:
            self.pending -= count

    # ------------------------------------------------------------------ the thread
    def _loop(self) -> None:
        while True:
            batch, stopping = self._take()
            live = [job for job in batch if not job.cancelled.is_set()]
            self.counters["cancelled"] += len(batch) - len(live)
            self._release(len(batch) - len(live))
            groups: dict[float, list[Job]] = {}
            for job in live:
                groups.setdefault(job.sampling.temperature, []).append(job)
            for temperature, group in groups.items():
                self.running = len(group)
                self._run(group, temperature)
                self.running = 0
                self._release(len(group))
            if stopping:
                return

    def _take(self) -> tuple[list[Job], bool]:
        first = self._jobs.get()
        if first is None:
            return [], True
        jobs = [first]
        deadline = time.monotonic() + self.batch_wait
        while len(jobs) < self.max_batch:
            try:
                job = self._jobs.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if job is None:
                return jobs, True
            jobs.append(job)
        return jobs, False

    def _run(self, group: Sequence[Job], temperature: float) -> None:
        # imported here, not with the module: building the command's parser needs no torch
        from trainers.generation.transformers_backend import generate

        self.counters["batches"] += 1
        try:
            generations = generate(self.policies, self.policy, [j.prompt for j in group], 1,
                                   seeds=[j.seed for j in group], temperature=temperature,
                                   max_new_tokens=max(j.sampling.max_tokens for j in group),
                                   on_step=lambda *step: self._step(group, *step))
        except Exception as error:  # the requests of this batch get a 500 naming it; the server goes on
            for job in group:
                job.deliver(ErrorEvent(job.index, error))
            return
        for job, generation in zip(group, generations, strict=True):
            self._finish(job, generation)

    def _step(self, group: Sequence[Job], tokens: torch.Tensor, logps: torch.Tensor,
              table: torch.Tensor) -> list[int]:
        """The hook of :func:`generate`: record each live completion's token, stream it, and
        say which completions end here."""
        ids, values = tokens.tolist(), logps.tolist()
        width = max((j.sampling.top_logprobs or 0) for j in group)
        tops: list[list[tuple[int, float]]] = [[] for _ in group]
        if width:
            top_values, top_ids = table.topk(width, dim=-1)
            tops = [list(zip(i, v, strict=True)) for i, v in zip(top_ids.tolist(), top_values.tolist(), strict=True)]
        ended = []
        for row, job in enumerate(group):
            if job.end is not None:
                continue
            job.ids.append(ids[row])
            if job.sampling.top_logprobs is not None:
                top = [(t, self.piece(t), v) for t, v in tops[row][:job.sampling.top_logprobs]]
                job.logprobs.append(TokenLogprob(ids[row], self.piece(ids[row]), values[row], top))
            self.counters["tokens"] += 1
            job.end = self._advance(job, ids[row])
            if job.end is not None:
                ended.append(row)
        return ended

    def piece(self, token: int) -> str:
        """The text of one token, as the OpenAI API reports it in log-probs."""
        if token not in self._pieces:
            self._pieces[token] = self.policies.tokenizer.decode([token])
        return self._pieces[token]

    def _advance(self, job: Job, token: int) -> str | None:
        """Stream the token of ``job`` and say why it ends here (None: it goes on)."""
        if job.cancelled.is_set():
            return "cancelled"
        stops = job.sampling.stop
        end = "stop" if token in self.eos_ids else "length" if len(job.ids) >= job.sampling.max_tokens else None
        delta = ""
        if stops or job.sampling.stream:
            text = self.policies.tokenizer.decode(job.ids, skip_special_tokens=True)
            found = [i for i in (text.find(s) for s in stops) if i >= 0]
            if found:
                text, end = text[:min(found)], "stop"
                job.text = text
            # the last token sends all that is left; before it, what can no longer change
            safe = text if end else text[:len(text) - held_back(text, stops)]
            if safe.startswith(job.sent):
                delta, job.sent = safe[len(job.sent):], safe
        if job.sampling.stream:
            job.deliver(TokenEvent(job.index, delta, job.logprobs[-1] if job.logprobs else None))
        return end

    def _finish(self, job: Job, generation: Generation) -> None:
        if job.end == "cancelled":
            self.counters["cancelled"] += 1
            return
        self.counters["completions"] += 1
        if job.text is not None:  # cut before a stop string
            generation = dataclasses.replace(generation, text=job.text)
        reason = "stop" if job.end == "stop" else "length"
        logprobs = job.logprobs if job.sampling.top_logprobs is not None else None
        job.deliver(DoneEvent(job.index, generation, reason, logprobs))
