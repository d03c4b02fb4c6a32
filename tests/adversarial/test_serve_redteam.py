"""``pettingllm serve`` (trainers/generation/server.py) against hostile clients.

Whatever a client sends, the server answers with a clear HTTP error and keeps serving
everyone else: no request it cannot parse drops the connection without an answer, none
holds a thread forever, and none monopolises the one sampling thread. Each test speaks raw
HTTP over a socket (urllib would refuse to send most of these requests).
"""

from __future__ import annotations

import json
import socket

import pytest

pytest.importorskip("torch")

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.generation.server import MAX_N, PolicyServer, build_parser
from trainers.generation.server_app import MAX_BODY_BYTES
from trainers.models.policy_set import PolicySet

#: How long the server waits for a request body in these tests (the real one is ``REQUEST_TIMEOUT_S``).
TEST_TIMEOUT_S = 1.0
GOOD = {"model": "tiny", "prompt": [5, 6], "max_tokens": 1}


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    config = TrainConfig.from_flat(model=str(tiny_model_dir), max_new_tokens=4, steps=0, progress=False,
                                   tensorboard=False)
    config.validate()
    policies = PolicySet(config.model, {"assistant": "shared"})
    with PolicyServer(policies, model_name="tiny", max_new_tokens=4, request_timeout=TEST_TIMEOUT_S) as running:
        yield running


def exchange(server: PolicyServer, data: bytes, *, wait: float = 10.0) -> tuple[int | None, bytes]:
    """Send ``data`` raw, read the answer until the server closes; (status or None, body)."""
    with socket.create_connection(server.address, timeout=wait) as sock:
        sock.sendall(data)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except TimeoutError:
            pass
    if not answer.startswith(b"HTTP/"):
        return None, answer
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def post(server: PolicyServer, body: bytes, *, path: str = "/v1/completions", length: int | str | None = None,
         wait: float = 10.0) -> tuple[int | None, bytes]:
    announced = len(body) if length is None else length
    # one exchange per connection: without "Connection: close" an HTTP/1.1 server keeps it open
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {announced}\r\n\r\n")
    return exchange(server, head.encode() + body, wait=wait)


def assert_still_serving(server: PolicyServer) -> None:
    status, body = post(server, json.dumps(GOOD).encode())
    assert status == 200 and json.loads(body)["choices"], body


def test_the_server_binds_loopback_by_default(server):
    assert build_parser().parse_args(["some-model"]).host == "127.0.0.1"
    assert server.address[0] == "127.0.0.1"


def test_deeply_nested_json_is_a_400_not_a_dropped_connection(server):
    # json.loads raises RecursionError (not a ValueError) past ~1000 levels of nesting
    status, body = post(server, b"[" * 100_000)
    assert status == 400 and b"not JSON" in body
    assert_still_serving(server)


@pytest.mark.parametrize("length", [2**62, MAX_BODY_BYTES + 1, -5, "12abc"])
def test_an_absurd_content_length_is_refused_before_reading(server, length):
    # 2**62: BufferedReader.read allocates the announced size up front (MemoryError, no answer)
    status, body = post(server, b"{}", length=length)
    if isinstance(length, int) and length >= 0:
        assert status in (400, 413) and b"Content-Length" in body
    else:  # not a byte count at all: uvicorn's HTTP parser answers before the app sees the request
        assert status == 400 and b"Invalid HTTP request" in body
    assert_still_serving(server)


def test_a_body_shorter_than_announced_times_out_with_408(server):
    status, body = post(server, b'{"model": "tiny"', length=1000, wait=TEST_TIMEOUT_S * 10)
    assert status == 408, body
    assert_still_serving(server)


def test_a_client_that_never_sends_its_request_does_not_block_others(server):
    with socket.create_connection(server.address) as idle:
        idle.sendall(b"POST /v1/completions HTTP/1.1\r\n")  # and nothing more
        assert_still_serving(server)


@pytest.mark.parametrize("stops", [[[1]], [{"a": 1}], [1.5], [True]])
def test_odd_stop_token_ids_are_a_400(server, stops):
    status, body = post(server, json.dumps({**GOOD, "stop_token_ids": stops}).encode())
    assert status == 400 and b"stop_token_ids" in body, body


def test_many_prompts_times_n_cannot_monopolise_the_sampler(server):
    # 300 prompts x n=128 was 38,400 completions queued on the one sampling thread ahead of everyone
    status, body = post(server, json.dumps({**GOOD, "prompt": [[5]] * 300, "n": MAX_N}).encode())
    assert status == 400 and b"at most" in body, body
    status, body = post(server, json.dumps({**GOOD, "prompt": [[5]] * 2, "n": MAX_N // 2}).encode())
    assert status == 200 and len(json.loads(body)["choices"]) == MAX_N


@pytest.mark.parametrize("body", [
    b'{"model": "tiny", "prompt": [5], "max_tokens": 1, "temperature": NaN}',
    b'{"model": "tiny", "prompt": [5], "max_tokens": 1, "temperature": Infinity}',
    b'{"model": "tiny", "prompt": [5], "max_tokens": 1, "n": ' + b"9" * 5000 + b"}",  # int() digit limit
    b'{"model": "tiny", "prompt": [100000000000000000000000000000], "max_tokens": 1}',
    b'{"model": "tiny", "prompt": [5], "max_tokens": 1e400}',
    b'\xff\xfe{\x00}\x00',
    b'{"model": "tiny", "prompt": "\\ud800", "max_tokens": 1}',
    b'{"model": "tiny", "messages": [{"role": "user", "content": 5}], "max_tokens": 1}',
    b'{"model": "tiny", "messages": [{"role": "user", "content": "\\udfff"}], "max_tokens": 1}',
])
def test_malformed_fields_are_a_4xx_and_the_server_goes_on(server, body):
    path = "/v1/chat/completions" if b"messages" in body else "/v1/completions"
    status, answer = post(server, body, path=path)
    assert status is not None and 400 <= status < 500, answer
    assert_still_serving(server)
