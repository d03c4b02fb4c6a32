"""The generation protocol and its backends (trainers/generation).

Every backend that can run here passes the same conformance checks: the in-process
transformers backend, and the OpenAI-compatible server backend against a real server on
loopback (``pettingllm serve``'s :class:`PolicyServer` serving the tiny model). The trainer
runs a real step through each, with identical samples for the same seeds; the factory and
the config refuse what cannot work (an unknown backend, vLLM without vLLM, training on a
server whose weights the trainer cannot update) with one clear error.
"""

from __future__ import annotations

import json
import math
import threading
import typing
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from pettingllm_envs.model_policies.openai_policy import EndpointError, OpenAIChatPolicy, post_json  # noqa: E402
from trainers.algorithms.atgrpo.config import TrainConfig  # noqa: E402
from trainers.algorithms.generation_setup import build_generator  # noqa: E402
from trainers.generation import BACKENDS, BackendUnavailable, Generator  # noqa: E402
from trainers.generation.factory import GenerationBackend  # noqa: E402
from trainers.generation.openai_backend import OpenAIGenerator, parse_completion  # noqa: E402
from trainers.generation.server import PolicyServer  # noqa: E402
from trainers.generation.transformers_backend import TransformersGenerator, generate  # noqa: E402
from trainers.harness.errors import ConfigError  # noqa: E402
from trainers.models.policy_set import PolicySet  # noqa: E402

MAX_NEW_TOKENS = 10
PROMPTS = [[5, 6, 7, 8], [9, 10], [11, 12, 13]]


def config_for(model: Path, **overrides) -> TrainConfig:
    values = {"model": str(model), "max_new_tokens": MAX_NEW_TOKENS, "steps": 0, "progress": False,
              "tensorboard": False}
    values.update(overrides)
    config = TrainConfig.from_flat(**values)
    config.validate()
    return config


@pytest.fixture(scope="module")
def policies(tiny_model_dir) -> PolicySet:
    return PolicySet(config_for(tiny_model_dir).model, {"assistant": "shared"})


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    """A real OpenAI-compatible server on loopback, serving the tiny model with its own weights."""
    served = PolicySet(config_for(tiny_model_dir).model, {"assistant": "shared"})
    with PolicyServer(served, model_name="tiny", max_new_tokens=64) as running:
        yield running


def server_generator(policies: PolicySet, base_url: str, **overrides) -> OpenAIGenerator:
    values = {"tokenizer": policies.tokenizer, "stop_token_ids": policies.eos_ids, "temperature": 1.0,
              "max_new_tokens": MAX_NEW_TOKENS, "vocab_size": 259}
    values.update(overrides)
    return OpenAIGenerator(base_url, "tiny", **values)


@pytest.fixture(params=["transformers", "openai"])
def generator(request, policies, server):
    """Each backend that can run here, on the same tiny model."""
    made = TransformersGenerator(policies) if request.param == "transformers" else server_generator(
        policies, server.base_url)
    yield made
    made.close()


# ----------------------------------------------------------------- conformance
def test_every_backend_keeps_the_protocol(generator, policies):
    assert isinstance(generator, Generator)
    assert isinstance(generator.follows_updates, bool)
    assert generator.logprob_source in typing.get_args(typing.get_type_hints(Generator)["logprob_source"])
    seeds = list(range(100, 100 + len(PROMPTS) * 3))
    out = generator.generate("shared", PROMPTS, 3, seeds=seeds)
    assert [g.prompt_ids for g in out] == [p for p in PROMPTS for _ in range(3)]  # prompt-major
    for g in out:
        assert 1 <= len(g.completion_ids) <= MAX_NEW_TOKENS
        stops = [i for i, t in enumerate(g.completion_ids) if t in policies.eos_ids]
        assert stops in ([], [len(g.completion_ids) - 1])  # ends at, and includes, its first stop id
        assert g.logprobs is not None and len(g.logprobs) == len(g.completion_ids)
        assert all(math.isfinite(v) and v <= 0 for v in g.logprobs)
        assert g.text == policies.tokenizer.decode(g.completion_ids, skip_special_tokens=True)
    again = generator.generate("shared", PROMPTS, 3, seeds=seeds)
    assert [g.completion_ids for g in again] == [g.completion_ids for g in out]  # same seeds, same samples
    other = generator.generate("shared", PROMPTS, 3, seeds=[s + 1000 for s in seeds])
    assert [g.completion_ids for g in other] != [g.completion_ids for g in out]
    unseeded = generator.generate("shared", PROMPTS[:1], 2)
    assert len(unseeded) == 2
    with pytest.raises(ValueError, match="2 seeds for 3 prompts x 1"):
        generator.generate("shared", PROMPTS, 1, seeds=[1, 2])
    with policies.active("shared") as model:
        generator.sync("shared", model)  # the weights did not change: neither do the samples
    assert [g.completion_ids for g in generator.generate("shared", PROMPTS, 3, seeds=seeds)] == \
        [g.completion_ids for g in out]


def test_a_seeded_completion_does_not_depend_on_its_batch(policies):
    """Per-completion seeds: the same (prompt, seed) gives the same tokens alone or among others
    (with the global generator, a row's draws depended on the rows before it)."""
    generator = TransformersGenerator(policies)
    batch = generator.generate("shared", PROMPTS, 2, seeds=[11, 12, 13, 14, 15, 16])
    alone = generator.generate("shared", [PROMPTS[1]], 1, seeds=[14])
    assert alone[0].completion_ids == batch[3].completion_ids
    assert alone[0].logprobs == pytest.approx(batch[3].logprobs, abs=1e-5)
    shorter = generate(policies, "shared", [PROMPTS[1]], 1, seeds=[14], max_new_tokens=3)
    assert shorter[0].completion_ids == batch[3].completion_ids[:3]  # a smaller budget gives a prefix


def test_server_and_in_process_backends_draw_identical_samples(policies, server):
    """The server batches concurrent requests its own way; seeds make that invisible."""
    seeds = list(range(7, 7 + len(PROMPTS) * 4))
    local = TransformersGenerator(policies).generate("shared", PROMPTS, 4, seeds=seeds)
    remote_generator = server_generator(policies, server.base_url, concurrency=5)
    remote = remote_generator.generate("shared", PROMPTS, 4, seeds=seeds)
    remote_generator.close()
    assert [g.completion_ids for g in remote] == [g.completion_ids for g in local]
    for a, b in zip(local, remote, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


def test_greedy_decoding_is_the_argmax_chain(policies):
    out = generate(policies, "shared", [PROMPTS[0]], 2, temperature=0.0, max_new_tokens=4)
    assert out[0].completion_ids == out[1].completion_ids
    with policies.active("shared") as model, torch.no_grad():
        ids = torch.tensor([PROMPTS[0] + out[0].completion_ids[:-1]])
        logits = model(input_ids=ids).logits[0, len(PROMPTS[0]) - 1:]
    assert logits.argmax(-1).tolist() == out[0].completion_ids


# ------------------------------------------------------------------- factory
def test_backends_have_one_definition():
    assert set(typing.get_args(GenerationBackend)) == set(BACKENDS)
    with pytest.raises(ConfigError, match="one of transformers, vllm, openai"):
        TrainConfig.from_flat(model="m", generation_backend="tgi").validate()


def test_factory_refuses_an_unknown_backend_by_name(policies, tiny_model_dir):
    config = config_for(tiny_model_dir).replace(generation_backend="tgi")  # past validate, as a caller could
    with pytest.raises(ValueError, match="unknown generation backend 'tgi'; known: transformers, vllm, openai"):
        build_generator(config, policies)


def test_factory_says_what_vllm_needs(policies, tiny_model_dir):
    from trainers.generation.vllm_backend import vllm_available

    if vllm_available():
        pytest.skip("vLLM and a GPU are here: the engine tests in test_vllm_backend.py run instead")
    with pytest.raises(BackendUnavailable, match=r"pip install vllm|CUDA GPU"):
        build_generator(config_for(tiny_model_dir, generation_backend="vllm"), policies)


def test_factory_builds_each_backend_that_runs_here(policies, tiny_model_dir, server):
    built = build_generator(config_for(tiny_model_dir), policies)
    assert isinstance(built, TransformersGenerator)
    remote = build_generator(config_for(tiny_model_dir, generation_backend="openai", openai_base_url=server.base_url,
                                        openai_model="tiny"), policies)
    assert isinstance(remote, OpenAIGenerator) and remote.vocab_size == 259 and not remote.require_logprobs
    remote.close()


# ------------------------------------------------- training on a server: explicit
def test_training_on_a_server_that_cannot_follow_the_updates_is_refused(tiny_model_dir):
    with pytest.raises(ConfigError, match="off_policy_generation=true"):
        config_for(tiny_model_dir, generation_backend="openai", openai_base_url="http://127.0.0.1:1/v1", steps=3)
    with pytest.raises(ConfigError, match="needs openai_base_url"):
        config_for(tiny_model_dir, generation_backend="openai")
    allowed = config_for(tiny_model_dir, generation_backend="openai", openai_base_url="http://127.0.0.1:1/v1",
                         steps=3, off_policy_generation=True)
    assert allowed.uses_truncated_is()  # auto: the server's log-probs are another engine's
    assert not config_for(tiny_model_dir).uses_truncated_is()  # the in-process sampler is the trained model


def toy_run(model: Path, run_dir: Path, **overrides) -> TrainConfig:
    half = "".join(chr(c) for c in range(128))
    values = {"env": "toy_bytes_v0", "model": str(model), "run_dir": str(run_dir), "max_new_tokens": 3,
              "problems_per_step": 2, "n_samples": 4, "lr": 5e-2, "progress": False, "tensorboard": False,
              "eval_every": 0, "steps": 1, "drop_degenerate": False, "dump_samples": str(run_dir / "samples.jsonl"),
              "env_kwargs": {"targets": {"first": half, "second": half}}}
    values.update(overrides)
    return TrainConfig.from_flat(**values)


def dumped(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    keys = ("problem_id", "branch", "agent", "turn", "prompt", "completion", "reward")
    return [{k: r[k] for k in keys} for r in rows]


@pytest.mark.slow
def test_the_trainer_runs_a_step_through_each_backend_with_identical_samples(toy, tiny_model_dir, server, tmp_path):
    """One real AT-GRPO step (tree rollout, advantages, PPO update) sampled in-process and through
    the server: the same samples for the same seeds; the server's log-probs give truncated-IS
    weights of 1 (the server holds the trainer's initial weights)."""
    from trainers.algorithms.atgrpo.train import Trainer

    local = Trainer(toy_run(tiny_model_dir, tmp_path / "local"))
    local_metrics = local.train()
    remote = Trainer(toy_run(tiny_model_dir, tmp_path / "remote", generation_backend="openai",
                             openai_base_url=server.base_url, openai_model="tiny", off_policy_generation=True))
    assert isinstance(remote.generator, OpenAIGenerator)
    remote_metrics = remote.train()
    remote.generator.close()
    assert dumped(tmp_path / "remote") == dumped(tmp_path / "local")
    assert remote_metrics[0]["reward/mean"] == local_metrics[0]["reward/mean"]
    assert remote_metrics[0]["tis/weight_mean"] == pytest.approx(1.0, abs=1e-4)
    assert "tis/weight_mean" not in local_metrics[0]
    assert remote_metrics[0]["samples/trained"] == local_metrics[0]["samples/trained"] > 0


class _TextOnlyProxy:
    """A server that answers like llama.cpp or a hosted API: text only, no token ids, no
    log-probs. It forwards to the real server and drops what such servers do not send."""

    def __init__(self, upstream: str) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                payload = post_json(upstream + "/completions", body)
                for choice in payload["choices"]:
                    choice.pop("token_ids", None)
                    choice["logprobs"] = None
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_text_only_server_is_retokenized_and_cannot_feed_truncated_is(policies, server):
    proxy = _TextOnlyProxy(server.base_url)
    try:
        seeds = [21, 22, 23, 24]
        direct = TransformersGenerator(policies).generate("shared", PROMPTS[:2], 2, seeds=seeds)
        plain = server_generator(policies, proxy.base_url)
        texts = plain.generate("shared", PROMPTS[:2], 2, seeds=seeds)
        plain.close()
        for via_text, exact in zip(texts, direct, strict=True):
            assert via_text.logprobs is None  # nothing to correct with: the trainer's own rule applies
            assert via_text.text == exact.text
            stopped = exact.completion_ids[-1] in policies.eos_ids
            body = via_text.completion_ids[:-1] if stopped else via_text.completion_ids
            assert body == plain._tokenize(exact.text)  # the ids the policy would emit to write it
            assert (via_text.completion_ids[-1] == policies.eos_ids[0]) == stopped  # the stop is kept
        strict = server_generator(policies, proxy.base_url, require_logprobs=True)
        with pytest.raises(EndpointError, match="no per-token log-probs"):
            strict.generate("shared", PROMPTS[:1], 1, seeds=[1])
        strict.close()
    finally:
        proxy.close()


# --------------------------------------------------- what a server may send back
def parse(payload, **overrides):
    values = {"where": "srv", "tokenize": lambda text: [ord(c) for c in text], "stop_ids": [1], "vocab_size": 259,
              "max_tokens": 4}
    values.update(overrides)
    return parse_completion(payload, **values)


def choice(**fields):
    return {"choices": [{"text": "ab", "finish_reason": "length", **fields}]}


def test_the_server_answer_is_checked_before_it_reaches_the_update():
    assert parse(choice(token_ids=[97, 98], logprobs={"token_logprobs": [-0.5, -1.0]})) == ([97, 98], [-0.5, -1.0])
    vllm_style = {"tokens": ["token_id:97", "token_id:1"], "token_logprobs": [-0.1, -0.2]}
    assert parse(choice(finish_reason="stop", logprobs=vllm_style)) == ([97, 1], [-0.1, -0.2])
    assert parse(choice(finish_reason="stop")) == ([97, 98, 1], None)  # text only: re-tokenized, stop appended
    assert parse(choice(text="abcdef")) == ([97, 98, 99, 100], None)  # re-tokenized past the budget: cut to it
    bad = {
        "no choice": {"choices": []},
        "two choices": {"choices": [{"text": "a"}, {"text": "b"}]},
        "not an object": {"choices": ["text"]},
        "id past the vocabulary": choice(token_ids=[97, 300]),
        "negative id": choice(token_ids=[-1]),
        "bool id": choice(token_ids=[True]),
        "a log-prob short": choice(token_ids=[97, 98], logprobs={"token_logprobs": [-0.5]}),
        "positive log-prob": choice(token_ids=[97], logprobs={"token_logprobs": [0.5]}),
        "NaN log-prob": choice(token_ids=[97], logprobs={"token_logprobs": [float("nan")]}),
        "text log-prob": choice(token_ids=[97], logprobs={"token_logprobs": ["-1"]}),
        "over the budget": choice(token_ids=[97, 97, 97, 97, 97]),
        "text not a string": {"choices": [{"text": 5}]},
    }
    for name, payload in bad.items():
        try:
            parse(payload)
        except EndpointError as error:
            assert str(error).startswith("srv: "), name
        else:
            pytest.fail(f"{name}: accepted")


def test_a_non_json_answer_is_an_endpoint_error():
    """A proxy's HTML error page with status 200 used to escape as a JSONDecodeError."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            data = b"<html>gateway</html>" if self.path.startswith("/html") else b"[1, 2]"
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        root = f"http://127.0.0.1:{httpd.server_address[1]}"
        with pytest.raises(EndpointError, match="not JSON"):
            post_json(root + "/html", {}, retries=0)
        with pytest.raises(EndpointError, match="expected a JSON object"):
            post_json(root + "/list", {}, retries=0)
        with pytest.raises(EndpointError, match="not JSON"):  # the bench suite's policy goes through it
            OpenAIChatPolicy(base_url=root + "/html", model="m", retries=0).complete([{"role": "user", "content": "x"}])
    finally:
        httpd.shutdown()
        httpd.server_close()


# ------------------------------------------------------------------ the server
def raw_post(url: str, data: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_server_refuses_bad_requests_with_a_reason(server):
    url = server.base_url + "/completions"
    good = {"model": "tiny", "prompt": [5, 6], "max_tokens": 2}
    cases = {
        b"not json": (400, "not JSON"),
        b"[1]": (400, "JSON object"),
        json.dumps({**good, "model": "other"}).encode(): (404, "not served"),
        json.dumps({**good, "max_tokens": 65}).encode(): (400, "max_tokens"),
        json.dumps({**good, "max_tokens": "2"}).encode(): (400, "max_tokens"),
        json.dumps({**good, "temperature": -1}).encode(): (400, "temperature"),
        json.dumps({**good, "n": 0}).encode(): (400, "'n'"),
        json.dumps({**good, "seed": -3}).encode(): (400, "seed"),
        json.dumps({**good, "stop": [""]}).encode(): (400, "stop"),
        json.dumps({**good, "stop": ["a"] * 5}).encode(): (400, "stop"),
        json.dumps({**good, "stop_token_ids": [7]}).encode(): (400, "stop_token_ids"),
        json.dumps({**good, "prompt": [5, 999]}).encode(): (400, "prompt token ids"),
        json.dumps({**good, "prompt": []}).encode(): (400, "prompt"),
        json.dumps({**good, "prompt": [[5], {"a": 1}]}).encode(): (400, "prompt"),
        json.dumps({**good, "logprobs": -1}).encode(): (400, "logprobs"),
    }
    for data, (status, message) in cases.items():
        code, payload = raw_post(url, data)
        assert code == status and message in payload["error"]["message"], (data, payload)
    code, payload = raw_post(server.base_url + "/chat/completions",
                             json.dumps({"model": "tiny", "messages": "hi"}).encode())
    assert code == 400 and "messages" in payload["error"]["message"]
    code, payload = raw_post(url, json.dumps({**good, "prompt": ["ab", [5, 6]], "n": 2, "logprobs": 0}).encode())
    assert code == 200 and len(payload["choices"]) == 4 and payload["usage"]["completion_tokens"] > 0
    models = json.loads(urllib.request.urlopen(server.base_url + "/models", timeout=30).read())
    assert [m["id"] for m in models["data"]] == ["tiny"]


@pytest.mark.slow
def test_the_bench_suite_plays_through_the_server(server, tmp_path):
    """The evaluation suite's ``openai:`` policy (chat completions) against ``pettingllm serve``:
    the env package reaches the in-process sampler over HTTP without importing trainers."""
    from pettingllm_envs.evaluation.suite import SuiteConfig, run_suite

    rows = run_suite(SuiteConfig(envs=["tictactoe_v0"], policies=[f"openai:tiny@{server.base_url}"], episodes=2,
                                 max_tokens=8, concurrency=2), tmp_path, progress=False)
    (row,) = rows
    assert row["episodes"] == 2 and row["completion_tokens"] > 0
    records = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert all(r["replies"] for r in records)


@pytest.mark.slow
def test_pettingllm_serve_runs_as_a_command(tiny_model_dir):
    """The plug-in command end to end: it starts, answers, and stops on Ctrl-C with status 0."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "pettingllm_envs", "serve", str(tiny_model_dir), "--port", "0",
                             "--served-model-name", "tiny", "--max-new-tokens", "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # a background shell leaves SIGINT ignored: restore a terminal's Ctrl-C
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = proc.stderr.readline()
        while line and "[serve]" not in line:
            line = proc.stderr.readline()
        assert "[serve]" in line, "serve exited before it listened"
        base_url = line.split(" at ")[1].split()[0]
        code, payload = raw_post(base_url + "/completions",
                                 json.dumps({"model": "tiny", "prompt": "hi", "max_tokens": 4, "seed": 3}).encode())
        assert code == 200 and 1 <= payload["usage"]["completion_tokens"] <= 4
        code, payload = raw_post(base_url + "/completions",
                                 json.dumps({"model": "tiny", "prompt": "hi", "max_tokens": 5}).encode())
        assert code == 400 and "--max-new-tokens" in payload["error"]["message"]
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


def test_the_suites_hf_policy_is_the_in_process_greedy_sampler(tiny_model_dir, policies):
    """``hf:`` specs reach the trainer's sampler through the ``pettingllm.model_policies`` entry
    point: the env package finds it without importing trainers."""
    from pettingllm_envs.evaluation.suite import build_policy

    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}]
    policy, usage = build_policy(f"hf:{tiny_model_dir}", "tictactoe_v0", "multi", 6, 0)
    text = policy("2+2?", "player_x", {"messages": messages})
    prompt = policies.encode_prompt(messages).ids
    (expected,) = generate(policies, "shared", [prompt], 1, temperature=0.0, max_new_tokens=6)
    assert text == expected.text
    assert usage == {"prompt_tokens": len(prompt), "completion_tokens": len(expected.completion_ids)}
