"""Weight sync by broadcast (:mod:`trainers.distributed.weight_sync`): after a sync the engines
hold exactly the sender's weights, and a mismatched layout stops every rank with one clear error.

Two levels: the collective itself between this process and a second local process (gloo on
loopback), and the engine path, this process as rank 0 broadcasting into two
:class:`~trainers.distributed.engine.GenerationEngine` Ray actors (full weights and a LoRA
adapter), read back and compared with ``torch.equal``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from repo_paths import REPO as ROOT  # noqa: E402

from trainers.algorithms.atgrpo.config import TrainConfig  # noqa: E402
from trainers.distributed.engine import GenerationEngine, weight_state  # noqa: E402
from trainers.distributed.weight_sync import (  # noqa: E402
    EngineBroadcast,
    broadcast_tensors,
    buckets,
    host_store,
    open_group,
    sync_tensors,
)
from trainers.models.policy_set import PolicySet  # noqa: E402

RECEIVER = textwrap.dedent("""
    import sys, torch
    from trainers.distributed.weight_sync import broadcast_tensors, open_group
    port, out, shapes = int(sys.argv[1]), sys.argv[2], eval(sys.argv[3])
    tensors = [torch.zeros(shape, dtype=dtype) for shape, dtype in shapes]
    group = open_group("127.0.0.1", port, 1, 2, timeout_s=60)
    try:
        broadcast_tensors(group, tensors, bucket_bytes=64)
    except ValueError as error:
        print("refused:", error)
        sys.exit(3)
    torch.save(tensors, out)
""")


def start_receiver(port: int, out: Path, shapes: list[tuple[tuple[int, ...], torch.dtype]]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", RECEIVER, str(port), str(out), repr(shapes)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_buckets_split_on_dtype_and_size():
    tensors = [torch.zeros(4), torch.zeros(4), torch.zeros(4, dtype=torch.int64), torch.zeros(100)]
    assert [len(run) for run in buckets(tensors, bucket_bytes=32)] == [2, 1, 1]


def test_a_second_process_receives_the_exact_tensors(tmp_path):
    """Mixed dtypes, more tensors than fit one bucket, a tensor bigger than a bucket: all arrive bit-exact."""
    generator = torch.Generator().manual_seed(0)
    sent = [torch.randn(3, 5, generator=generator), torch.randn(7, generator=generator),
            torch.randint(-9, 9, (4, 2), generator=generator), torch.randn(40, generator=generator).double(),
            torch.randn(2, 2, generator=generator)]
    store, out = host_store("127.0.0.1", 2, timeout_s=60), tmp_path / "received.pt"
    receiver = start_receiver(store.port, out, [(tuple(t.shape), t.dtype) for t in sent])
    try:
        group = open_group("127.0.0.1", store.port, 0, 2, timeout_s=60, store=store)
        broadcast_tensors(group, sent, bucket_bytes=64)
        output, _ = receiver.communicate(timeout=120)
    finally:
        receiver.kill()
    assert receiver.returncode == 0, output
    received = torch.load(out)
    assert len(received) == len(sent)
    assert all(torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(sent, received, strict=True))


def test_a_receiver_with_another_layout_is_refused_on_both_sides(tmp_path):
    """Misaligned bytes must never load: rank 0 and the engine both raise, nothing is written."""
    sent = [torch.ones(3, 5), torch.ones(7)]
    store, out = host_store("127.0.0.1", 2, timeout_s=60), tmp_path / "received.pt"
    receiver = start_receiver(store.port, out, [((5, 3), torch.float32), ((7,), torch.float32)])
    try:
        group = open_group("127.0.0.1", store.port, 0, 2, timeout_s=60, store=store)
        with pytest.raises(ValueError, match="same architecture"):
            broadcast_tensors(group, sent)
        output, _ = receiver.communicate(timeout=120)
    finally:
        receiver.kill()
    assert receiver.returncode == 3 and "refused" in output, output
    assert not out.exists()


class InspectableEngine(GenerationEngine):
    """The real engine plus a read-back of what it would generate with."""

    def weights(self) -> dict:
        model = self.policies.peft_model if self.config.model.lora else self.policies.models[self.policy]
        return weight_state(model, self.policy, lora=self.config.model.lora, merged=False)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_engines_hold_the_senders_weights_after_a_broadcast(ray_cluster, tiny_model_dir, lora):
    config = TrainConfig.from_flat(model=str(tiny_model_dir), lora=lora, steps=0, progress=False, tensorboard=False)
    config.validate()
    policies = PolicySet(config.model, {"assistant": "shared"})
    model = policies.peft_model if lora else policies.models["shared"]
    with torch.no_grad():  # an "update": every synced tensor moves
        for tensor in sync_tensors(model, adapter="shared" if lora else None):
            tensor.add_(torch.randn_like(tensor))
    expected = weight_state(model, "shared", lora=lora, merged=False)
    actor = ray_cluster.remote(InspectableEngine)
    engines = [actor.options(num_cpus=1).remote(config, ["assistant"], "shared") for _ in range(2)]
    try:
        before = ray_cluster.get(engines[0].weights.remote(), timeout=300)
        assert not all(torch.equal(before[k], v) for k, v in expected.items())
        EngineBroadcast(engines, backend="gloo", timeout_s=300).send(
            sync_tensors(model, adapter="shared" if lora else None))
        for state in ray_cluster.get([engine.weights.remote() for engine in engines], timeout=300):
            assert state.keys() == expected.keys()
            assert all(torch.equal(state[k], v) for k, v in expected.items())
    finally:
        for engine in engines:
            ray_cluster.kill(engine)


@pytest.mark.slow
def test_a_distributed_run_with_broadcast_sync_samples_the_updated_weights(ray_cluster, tiny_model_dir, tmp_path):
    """``weight_sync: broadcast`` from a single-rank training group: step 2's samples (drawn by
    the engines after the step-1 update arrived by broadcast) are the single-process run's."""
    from run_configs import distributed_toy_config as config
    from run_configs import layout

    from trainers.algorithms.atgrpo.train import Trainer
    from trainers.distributed.trainer import DistributedTrainer

    local = Trainer(config(tiny_model_dir, tmp_path / "local", steps=2))
    local.train()
    run = tmp_path / "remote"
    with DistributedTrainer(config(tiny_model_dir, run, steps=2),
                            layout(train_workers_per_policy=1, weight_sync="broadcast")) as remote:
        remote.train()
        assert set(remote.generator.broadcasts) == set(remote.policies.names)  # the path taken
    samples = (tmp_path / "local" / "samples.jsonl").read_text()
    assert samples == (run / "samples.jsonl").read_text()
    assert {json.loads(line)["step"] for line in samples.splitlines()} == {1, 2}
