"""The OpenAI-compatible path against a real ``vllm serve`` on loopback (slow; CI's vLLM venv).

One vLLM OpenAI server (``python -m vllm.entrypoints.openai.api_server``; the ``vllm``
console script of the CPU build is not used) serves SmolLM2-135M-Instruct from the
converted ``from_pretrained`` directory on 127.0.0.1 and a free port, in float32 with
``--logprobs-mode processed_logprobs`` (what truncated importance sampling needs,
:mod:`trainers.generation.openai_backend`). The checks:

* :class:`~trainers.generation.openai_backend.OpenAIGenerator` samples through it: token-id
  prompts, one seed per completion, the same samples for the same seeds however the requests
  are batched, other samples for other seeds;
* the server's log-probs match the trainer's own scoring of the same tokens
  (:meth:`~trainers.models.policy_set.PolicySet.token_logprobs`; the gap is printed);
* stop ids end a completion and appear nowhere else in it;
* ``pettingllm bench`` with an ``openai:`` policy plays an episode against it.

The server runs in a session of its own; the fixture ends the whole process group (the API
server and its engine process) and checks that nothing of it is left, whatever the tests did.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("vllm", reason="the vLLM OpenAI server (CI's vLLM venv)")
torch = pytest.importorskip("torch")

from trainers.algorithms.atgrpo.config import TrainConfig  # noqa: E402
from trainers.distributed.weight_sync import free_port  # noqa: E402
from trainers.generation.openai_backend import OpenAIGenerator  # noqa: E402
from trainers.models.policy_set import PolicySet  # noqa: E402

pytestmark = pytest.mark.slow

MODEL_NAME = "smol"
READY_TIMEOUT_S = 600  # a loaded 2-core CI machine takes minutes to start the engine
#: Largest |server log-prob - trainer log-prob| per token accepted (both float32, same weights; measured 3e-5).
LOGPROB_TOLERANCE = 1e-3
SERVER_ENV = {"VLLM_CPU_OMP_THREADS_BIND": "0-1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_CI_ENV": "1"}


def end_process_group(process: subprocess.Popen, grace_s: float = 60.0) -> None:
    """SIGTERM the server's process group, SIGKILL what outlives ``grace_s``; raise if anything is left."""
    group = process.pid  # start_new_session: the server leads its own group
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(group, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            process.poll()  # reap the leader; its children are reaped by init once it is gone
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)
    raise AssertionError(f"processes of the vLLM server's group {group} outlived SIGKILL")


@pytest.fixture(scope="module")
def vllm_server(smollm2_dir, tmp_path_factory):
    """The base URL of a running vLLM OpenAI server for SmolLM2 (module docstring)."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("vllm_serve") / "server.log"
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(smollm2_dir),
               "--served-model-name", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
               "--enforce-eager", "--max-model-len", "2048", "--seed", "0", "--logprobs-mode", "processed_logprobs"]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                   env={**os.environ, **SERVER_ENV})
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"vLLM server exited with {process.returncode}:\n{log_path.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vLLM server not ready after {READY_TIMEOUT_S} s:\n{log_path.read_text()[-4000:]}")
            time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        end_process_group(process)


@pytest.fixture(scope="module")
def policies(smollm2_dir) -> PolicySet:
    config = TrainConfig.from_flat(model=str(smollm2_dir), temperature=1.0, steps=0, progress=False, tensorboard=False)
    config.validate()
    return PolicySet(config.model, {"assistant": "shared"})


def chat_prompt(policies: PolicySet, text: str) -> list[int]:
    return list(policies.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                       tokenize=True, return_dict=False))


def generator_for(policies: PolicySet, base_url: str, *, max_new_tokens: int = 24, concurrency: int = 4,
                  temperature: float = 1.0) -> OpenAIGenerator:
    return OpenAIGenerator(base_url, MODEL_NAME, tokenizer=policies.tokenizer, stop_token_ids=policies.eos_ids,
                           temperature=temperature, max_new_tokens=max_new_tokens, concurrency=concurrency,
                           require_logprobs=True)


def test_seeded_samples_are_reproducible_and_independent_of_batching(policies, vllm_server):
    prompts = [chat_prompt(policies, "Name a colour."), chat_prompt(policies, "Count to five.")]
    seeds = [11, 12, 13, 14]
    first = generator_for(policies, vllm_server, concurrency=4).generate("shared", prompts, 2, seeds=seeds)
    again = generator_for(policies, vllm_server, concurrency=1).generate("shared", prompts, 2, seeds=seeds)
    assert [g.completion_ids for g in first] == [g.completion_ids for g in again]
    assert all(g.completion_ids and g.logprobs is not None for g in first)
    other = generator_for(policies, vllm_server).generate("shared", prompts, 2, seeds=[21, 22, 23, 24])
    assert [g.completion_ids for g in other] != [g.completion_ids for g in first]


def test_server_logprobs_match_the_trainers_scoring(policies, vllm_server):
    prompts = [chat_prompt(policies, "What is 2 + 3?"), chat_prompt(policies, "Write a haiku about rain.")]
    generations = generator_for(policies, vllm_server, max_new_tokens=32).generate("shared", prompts, 2,
                                                                                   seeds=[1, 2, 3, 4])
    with torch.no_grad(), policies.active("shared") as model:
        trainer_logp, mask = policies.token_logprobs(model, [g.prompt_ids for g in generations],
                                                     [g.completion_ids for g in generations])
    gaps = [abs(server - float(trainer_logp[row, k]))
            for row, g in enumerate(generations) for k, server in enumerate(g.logprobs)]
    assert len(gaps) == int(mask.sum())
    print(f"server vs trainer log-prob gap over {len(gaps)} tokens: max {max(gaps):.2e}, "
          f"mean {sum(gaps) / len(gaps):.2e}")
    assert max(gaps) < LOGPROB_TOLERANCE


def test_stop_ids_end_completions(policies, vllm_server):
    prompts = [chat_prompt(policies, "Say hello."), chat_prompt(policies, "Reply with one word: yes or no?")]
    generations = generator_for(policies, vllm_server, max_new_tokens=48).generate("shared", prompts, 3,
                                                                                   seeds=list(range(6)))
    stops = set(policies.eos_ids)
    ended = [g for g in generations if g.completion_ids[-1] in stops]
    assert ended, "no completion of a short chat answer ended on a stop id"
    assert all(not stops.intersection(g.completion_ids[:-1]) for g in generations)


def test_bench_plays_an_episode_with_an_openai_policy(vllm_server, tmp_path):
    out = tmp_path / "bench"
    result = subprocess.run([sys.executable, "-m", "pettingllm_envs", "bench", "math_v0", "--policy",
                             f"openai:{MODEL_NAME}@{vllm_server}", "--episodes", "1", "--max-tokens", "32",
                             "--concurrency", "1", "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [r for r in records if str(r.get("policy", "")).startswith("openai:")], records
