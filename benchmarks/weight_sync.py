"""Benchmark: weight sync to generation engines, Ray's object store vs a gloo broadcast.

What is timed is one sync of a model's full weights from this process (the trainer side) to
``--engines`` Ray actors, from "the trainer has new weights" to "every engine holds them":

* **object store**: :func:`trainers.distributed.engine.weight_state` (a CPU copy of the state
  dict), ``ray.put``, and every engine's ``load_state_dict`` of the fetched copy (what
  :meth:`~trainers.distributed.engine.RayGenerator.push` and
  :meth:`~trainers.distributed.engine.GenerationEngine.load_weights` do);
* **broadcast**: :class:`trainers.distributed.weight_sync.EngineBroadcast` ``send`` (flat
  buckets broadcast over gloo, received in place into the parameters). Opening the group is
  paid once per run and reported apart (``setup_s``).

The engines here are small actors that hold the model and load weights with exactly the
engine's code (``load_state_dict``; :func:`~trainers.distributed.weight_sync.broadcast_tensors`
into :func:`~trainers.distributed.weight_sync.sync_tensors`), without a tokenizer or sampler,
so the 135M shape needs no model files. Shapes: ``tiny`` and ``small`` of
``benchmarks/trainer_step.py`` (Llama, byte-level vocabulary) and ``135m``, SmolLM2-135M's
architecture with random weights. After each timed sync every engine's weights are checked
against the sender's (a per-tensor checksum), so a path that moved the wrong bytes fails the run.
The two paths alternate (object store, broadcast, object store, ...), the first of each is a
warm-up, and medians are reported.

Run: ``python -m benchmarks.weight_sync [--shapes tiny,small,135m --engines 2 --repeats 5
--out PATH]``; results go to ``benchmarks/results/weight_sync.json``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.recording import result_keys, start_recording, write_results

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "weight_sync.json"
RESULT_KEYS = result_keys("engines", "repeats", "backend", "shapes")

#: LlamaConfig arguments per shape; tiny and small as ``trainers.models.tiny_model`` builds them
#: (benchmarks/trainer_step.py's SHAPES), 135m as SmolLM2-135M-Instruct's config.
SHAPES: dict[str, dict[str, Any]] = {
    "tiny": {"vocab_size": 259, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2},
    "small": {"vocab_size": 259, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
              "num_attention_heads": 4, "num_key_value_heads": 2},
    "135m": {"vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
             "num_attention_heads": 9, "num_key_value_heads": 3},
}


def build_model(shape: str, seed: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**SHAPES[shape], tie_word_embeddings=True)).eval()


def checksums(model: Any) -> list[float]:
    """One float64 sum per synced tensor: equal lists mean the weights arrived (up to collisions
    no random update produces)."""
    from trainers.distributed.weight_sync import sync_tensors

    return [float(t.double().sum()) for t in sync_tensors(model)]


class Engine:
    """An engine's weight-loading side (module docstring): a model and both ways to load into it."""

    def __init__(self, shape: str) -> None:
        self.model = build_model(shape, seed=1)  # not the sender's weights until a sync

    def load_weights(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state)

    def join_weight_group(self, host: str, port: int, rank: int, world_size: int, backend: str,
                          timeout_s: float) -> None:
        from trainers.distributed.weight_sync import open_group

        self.group = open_group(host, port, rank, world_size, backend=backend, timeout_s=timeout_s)

    def receive_weights(self) -> None:
        from trainers.distributed.weight_sync import broadcast_tensors, sync_tensors

        broadcast_tensors(self.group, sync_tensors(self.model))

    def checksums(self) -> list[float]:
        return checksums(self.model)


def measure(shape: str, engines: int, repeats: int) -> dict[str, Any]:
    import ray
    import torch

    from trainers.distributed.engine import weight_state
    from trainers.distributed.weight_sync import EngineBroadcast, sync_tensors

    model = build_model(shape, seed=0)
    actors = [ray.remote(Engine).options(num_cpus=1).remote(shape) for _ in range(engines)]
    try:
        ray.get([actor.checksums.remote() for actor in actors])
        start = time.perf_counter()
        broadcast = EngineBroadcast(actors, backend="gloo")
        setup_s = time.perf_counter() - start

        def object_store() -> None:
            ref = ray.put(weight_state(model, "shared", lora=False, merged=False))
            ray.get([actor.load_weights.remote(ref) for actor in actors])

        def collective() -> None:
            broadcast.send(sync_tensors(model))

        times: dict[str, list[float]] = {"object_store": [], "broadcast": []}
        for _ in range(repeats + 1):
            for path, sync in (("object_store", object_store), ("broadcast", collective)):
                with torch.no_grad():  # an update: the next sync must move new values
                    for tensor in sync_tensors(model):
                        tensor.add_(0.01)
                begin = time.perf_counter()
                sync()
                times[path].append(time.perf_counter() - begin)
                expected = checksums(model)
                if any(got != expected for got in ray.get([actor.checksums.remote() for actor in actors])):
                    raise SystemExit(f"{shape}: the {path} sync left an engine with other weights")
    finally:
        for actor in actors:
            ray.kill(actor)
    medians = {path: statistics.median(values[1:]) for path, values in times.items()}
    parameters = sum(t.numel() for t in sync_tensors(model))
    return {"parameters": parameters, "megabytes": round(parameters * 4 / 2**20, 1), "setup_s": round(setup_s, 4),
            **{f"{path}_s": round(value, 4) for path, value in medians.items()},
            "broadcast_speedup": round(medians["object_store"] / medians["broadcast"], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.weight_sync", description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="tiny,small,135m", help=f"comma-separated, from {sorted(SHAPES)}")
    parser.add_argument("--engines", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="timed syncs per path (after one warm-up)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    recording = start_recording()
    import ray

    ray.init(num_cpus=args.engines + 1, include_dashboard=False, log_to_driver=False)
    try:
        shapes = {}
        for shape in args.shapes.split(","):
            shapes[shape] = measure(shape, args.engines, args.repeats)
            print(shape, shapes[shape], flush=True)
    finally:
        ray.shutdown()
    results = {"engines": args.engines, "repeats": args.repeats, "backend": "gloo", "shapes": shapes}
    write_results(args.out, results, recording)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
