"""``pettingllm serve`` driven the way ``openai`` client users drive it (issue 41): sync, async and
streaming calls give the same tokens, the OpenAI fields are honoured or refused with a 400 naming
them, a killed client frees the sampler within a second, and 32 concurrent clients get answers
or a 429, never a hang."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("torch")
pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")

from trainers.algorithms.atgrpo.config import TrainConfig  # noqa: E402
from trainers.generation.server import PolicyServer  # noqa: E402
from trainers.models.policy_set import PolicySet  # noqa: E402

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}]


@pytest.fixture(scope="module")
def policies(tiny_model_dir):
    config = TrainConfig.from_flat(model=str(tiny_model_dir), max_new_tokens=4, steps=0, progress=False,
                                   tensorboard=False)
    config.validate()
    return PolicySet(config.model, {"assistant": "shared"})


@pytest.fixture(scope="module")
def server(policies):
    with PolicyServer(policies, model_name="tiny", max_new_tokens=1024, max_queue=64) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)


def metrics(server: PolicyServer) -> dict[str, float]:
    text = urllib.request.urlopen(server.base_url.removesuffix("/v1") + "/metrics", timeout=10).read().decode()
    return {name: float(value) for name, value in (line.split() for line in text.splitlines())}


@pytest.mark.parametrize("sampling", [{"temperature": 0}, {"temperature": 1, "seed": 7}])
def test_a_stream_yields_the_same_tokens_as_the_plain_answer(client, sampling):
    plain = client.chat.completions.create(model="tiny", messages=MESSAGES, max_completion_tokens=24, logprobs=True,
                                           top_logprobs=2, **sampling)
    chunks = list(client.chat.completions.create(model="tiny", messages=MESSAGES, max_completion_tokens=24,
                                                 logprobs=True, top_logprobs=2, stream=True, **sampling))
    deltas = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    streamed = [t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.content]
    (choice,) = plain.choices
    assert choice.message.content and "".join(deltas) == choice.message.content
    assert [(t.token, t.logprob) for t in streamed] == [(t.token, t.logprob) for t in choice.logprobs.content]
    assert len(streamed) == plain.usage.completion_tokens
    assert all(len(t.top_logprobs) == 2 for t in streamed)
    assert chunks[-1].choices[0].finish_reason == choice.finish_reason


def test_the_async_client_gets_the_sync_clients_samples(server, client):
    async def ask() -> list[str]:
        async_client = openai.AsyncOpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        answers = await asyncio.gather(*(async_client.completions.create(model="tiny", prompt="ab", max_tokens=12,
                                                                         seed=seed) for seed in range(4)))
        await async_client.close()
        return [a.choices[0].text for a in answers]

    expected = [client.completions.create(model="tiny", prompt="ab", max_tokens=12, seed=s).choices[0].text
                for s in range(4)]
    assert asyncio.run(ask()) == expected


def test_max_completion_tokens_n_seed_and_stop_strings_are_honoured(client):
    long = client.chat.completions.create(model="tiny", messages=MESSAGES, max_completion_tokens=40, temperature=0)
    text = long.choices[0].message.content
    assert long.usage.completion_tokens > 5, "greedy decoding of the tiny model stopped early: pick other messages"
    short = client.chat.completions.create(model="tiny", messages=MESSAGES, max_completion_tokens=5, temperature=0)
    assert short.usage.completion_tokens == 5 and short.choices[0].finish_reason == "length"
    assert text.startswith(short.choices[0].message.content)
    stop = text[len(text) // 2:len(text) // 2 + 2]
    cut = client.chat.completions.create(model="tiny", messages=MESSAGES, max_completion_tokens=40, temperature=0,
                                         stop=[stop])
    assert cut.choices[0].message.content == text[:text.find(stop)] and cut.choices[0].finish_reason == "stop"
    streamed = client.chat.completions.create(model="tiny", messages=MESSAGES, max_completion_tokens=40,
                                              temperature=0, stop=stop, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == text[:text.find(stop)]
    three = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=10, n=3, seed=11)
    one = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=10, seed=11)
    assert [c.index for c in three.choices] == [0, 1, 2]
    assert three.choices[0].message.content == one.choices[0].message.content


@pytest.mark.parametrize(("field", "value"), [
    ("tools", [{"type": "function", "function": {"name": "move", "parameters": {"type": "object"}}}]),
    ("response_format", {"type": "json_object"}), ("top_p", 0.5), ("frequency_penalty", 1.0),
    ("logit_bias", {"5": 10}), ("unheard_of", 1),
])
def test_what_the_sampler_cannot_do_is_a_400_naming_the_field(client, field, value):
    with pytest.raises(openai.BadRequestError, match=field):
        client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=2, extra_body={field: value})


def test_health_and_metrics(server, client):
    health = json.loads(urllib.request.urlopen(server.base_url.removesuffix("/v1") + "/health", timeout=10).read())
    assert health["status"] == "ok"
    before = metrics(server)["pettingllm_serve_tokens_total"]
    client.completions.create(model="tiny", prompt=[5, 6], max_tokens=3, temperature=0)
    assert metrics(server)["pettingllm_serve_tokens_total"] >= before + 1


KILLED_CLIENT = """
import openai, sys
openai.OpenAI(base_url=sys.argv[1], api_key="unused", max_retries=0, timeout=600).completions.create(
    model="tiny", prompt=[5, 6, 7], n=8, max_tokens=1024, temperature=0, stream=sys.argv[2] == "stream")
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["plain", "stream"])
def test_a_killed_client_frees_the_sampler_within_a_second(server, client, mode):
    """8 greedy completions of 1024 tokens take the sampler tens of seconds here; killed, they end
    at the next token (before: the server finished them and answered nobody else for minutes)."""
    proc = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, server.base_url, mode])
    try:
        deadline = time.monotonic() + 60
        while metrics(server)["pettingllm_serve_running_completions"] < 8:
            assert time.monotonic() < deadline and proc.poll() is None, "the request never started sampling"
            time.sleep(0.05)
        time.sleep(0.5)  # well into its 1024 tokens
    finally:
        proc.kill()
        proc.wait()
    killed = time.monotonic()
    answer = client.completions.create(model="tiny", prompt=[5], max_tokens=1)
    freed_after = time.monotonic() - killed
    print(f"{mode}: the next request was answered {freed_after:.3f} s after the kill")
    assert answer.choices and freed_after < 1.0, f"the next request waited {freed_after:.2f} s"
    assert metrics(server)["pettingllm_serve_queue_completions"] == 0


@pytest.mark.slow
def test_32_concurrent_clients_get_an_answer_or_a_429_never_a_hang(policies):
    async def ask(base_url: str) -> list[str]:
        async_client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=120)

        async def one(seed: int) -> str:
            try:
                reply = await async_client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=16,
                                                                   seed=seed)
            except openai.RateLimitError:
                return "429"
            return "answer" if reply.choices[0].message.content is not None else "empty"

        outcomes = await asyncio.wait_for(asyncio.gather(*(one(s) for s in range(32))), timeout=120)
        await async_client.close()
        return outcomes

    with PolicyServer(policies, model_name="tiny", max_new_tokens=16, max_queue=8) as small:
        outcomes = asyncio.run(ask(small.base_url))
    assert set(outcomes) <= {"answer", "429"} and outcomes.count("answer") >= 8, outcomes
    with PolicyServer(policies, model_name="tiny", max_new_tokens=16) as roomy:
        assert asyncio.run(ask(roomy.base_url)) == ["answer"] * 32


def test_a_full_queue_is_a_429_with_retry_after(policies):
    with PolicyServer(policies, model_name="tiny", max_new_tokens=1024, max_queue=8) as small:
        busy = openai.OpenAI(base_url=small.base_url, api_key="unused", max_retries=0)
        stream = busy.completions.create(model="tiny", prompt=[5, 6, 7], n=8, max_tokens=1024, temperature=0,
                                         stream=True)
        next(iter(stream))
        assert small.engine.pending == 8, "the 8 completions should still be sampling"
        with pytest.raises(openai.RateLimitError, match="queue is full") as refused:
            busy.completions.create(model="tiny", prompt=[5], max_tokens=1)
        assert refused.value.response.headers["retry-after"] == "1"
        stream.close()
