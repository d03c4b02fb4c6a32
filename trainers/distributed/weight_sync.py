"""Weight sync by collective broadcast: the trainer side (rank 0) to generation engines.

The object-store path (:meth:`trainers.distributed.engine.RayGenerator.push`) copies the
weights into a state dict, serialises it into Ray's object store, and every engine
deserialises a copy and loads it. Here the weights travel as a ``torch.distributed``
broadcast instead: the sender and the engines form a process group of their own (gloo on
CPU, NCCL when the tensors are on CUDA), rank 0 broadcasts flat buckets of its tensors, and
each engine receives straight into its model's parameters.

The group is *not* the default process group (:func:`open_group` builds it on a
``TCPStore`` of its own): a training worker that already belongs to its policy's data-parallel
group, or an engine whose backend set one up (vLLM), can still join it.

No names, shapes or dtypes are sent: both sides derive the same tensor list from the same
architecture (:func:`sync_tensors`), and the first collective checks a fingerprint of that
layout on every rank, so a mismatched engine fails loudly at once instead of loading
misaligned bytes. Buckets are contiguous runs of one dtype up to ``bucket_bytes``, so a
model of hundreds of small tensors costs a few collectives, not hundreds.

The vLLM engine keeps the object-store path (its weights live inside vLLM's workers, which
take named, merged tensors through ``load_weights``; docs/integrations/generation.md).
"""

from __future__ import annotations

import atexit
import hashlib
import socket
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch

#: Default bucket size: large enough that a 135M-parameter model is a handful of broadcasts,
#: small enough that the sender's flat copy stays a fraction of the model's memory.
BUCKET_BYTES = 64 * 1024 * 1024


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago on ``host`` (for a process that binds it itself; a
    group's rank 0 uses :func:`host_store`, which cannot lose that race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def host_store(host: str, world_size: int, timeout_s: float = 300.0) -> Any:
    """Rank 0's rendezvous store on a port the OS picks (``.port``: what the other ranks connect to)."""
    from torch import distributed as dist

    return dist.TCPStore(host, 0, world_size, is_master=True, timeout=timedelta(seconds=timeout_s),
                         wait_for_workers=False)


def default_backend() -> str:
    return "nccl" if torch.cuda.is_available() else "gloo"


@dataclass(eq=False)
class SyncGroup:
    """A process group and the store it rendezvoused on (rank 0's store serves the others, so it
    lives as long as the group).

    Close it (:meth:`close`) before the process ends; every group still open is closed at
    interpreter exit anyway. A gloo group left to the interpreter's teardown is destroyed after
    Python is gone, while its worker threads may still hold finished work that refers to Python
    objects: the process then aborts (``terminate called without an active exception``, exit
    -6) instead of exiting with its own status, as a receiver that refused a layout did under load."""

    group: Any
    store: Any
    rank: int

    def __post_init__(self) -> None:
        _OPEN_GROUPS.add(self)

    def close(self) -> None:
        """Stop the group's threads and release it (idempotent)."""
        if self.group is not None:
            self.group.shutdown()
            self.group = None
        _OPEN_GROUPS.discard(self)


_OPEN_GROUPS: weakref.WeakSet[SyncGroup] = weakref.WeakSet()


@atexit.register
def _close_open_groups() -> None:
    for group in list(_OPEN_GROUPS):
        group.close()


def open_group(host: str, port: int, rank: int, world_size: int, *, backend: str = "gloo",
               timeout_s: float = 300.0, store: Any = None) -> SyncGroup:
    """A ``world_size`` process group outside the default one, on the store at ``host:port``
    (rank 0 passes the ``store`` it hosts, :func:`host_store`). Every rank must call this at about
    the same time (it blocks until all have)."""
    from torch import distributed as dist

    timeout = timedelta(seconds=timeout_s)
    if store is None:
        store = dist.TCPStore(host, port, world_size, is_master=False, timeout=timeout)
    prefixed = dist.PrefixStore("pettingllm-weight-sync", store)
    if backend == "gloo":
        group = dist.ProcessGroupGloo(prefixed, rank, world_size, timeout)
    elif backend == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        group = dist.ProcessGroupNCCL(prefixed, rank, world_size, options)
    else:
        raise ValueError(f"weight sync backend {backend!r}: expected 'gloo' or 'nccl'")
    return SyncGroup(group, store, rank)


def sync_tensors(model: Any, *, adapter: str | None = None) -> list[torch.Tensor]:
    """The tensors a sync moves, in an order every copy of the architecture agrees on: the
    LoRA adapter ``adapter``'s weights, or every parameter (tied ones once)."""
    if adapter is not None:
        from peft import get_peft_model_state_dict

        # These are detached views of the adapter's parameters: copying into them loads them.
        return list(get_peft_model_state_dict(model, adapter_name=adapter).values())
    return [parameter.detach() for parameter in model.parameters()]


def layout_fingerprint(tensors: Sequence[torch.Tensor]) -> int:
    """A 63-bit digest of the tensors' shapes and dtypes (what must agree for bytes to line up)."""
    digest = hashlib.sha256(repr([(tuple(t.shape), str(t.dtype)) for t in tensors]).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def buckets(tensors: Sequence[torch.Tensor], bucket_bytes: int) -> Iterator[list[torch.Tensor]]:
    """Consecutive runs of one dtype and device, each at most ``bucket_bytes`` (or one tensor)."""
    run: list[torch.Tensor] = []
    size = 0
    for tensor in tensors:
        nbytes = tensor.numel() * tensor.element_size()
        if run and (tensor.dtype != run[0].dtype or tensor.device != run[0].device or size + nbytes > bucket_bytes):
            yield run
            run, size = [], 0
        run.append(tensor)
        size += nbytes
    if run:
        yield run


def _check_layout(group: SyncGroup, tensors: Sequence[torch.Tensor], device: torch.device) -> None:
    """Every rank learns whether any rank's layout differs from rank 0's, and all stop together."""
    from torch import distributed as dist

    mine = layout_fingerprint(tensors)
    theirs = torch.tensor([mine], dtype=torch.int64, device=device)
    group.group.broadcast(theirs, 0).wait()
    mismatch = torch.tensor([int(int(theirs.item()) != mine)], dtype=torch.int64, device=device)
    options = dist.AllreduceOptions()
    options.reduceOp = dist.ReduceOp.MAX
    group.group.allreduce([mismatch], options).wait()
    if mismatch.item():
        raise ValueError(f"weight sync: the engines' tensors ({len(tensors)} here) do not have the sender's "
                         "shapes and dtypes; both sides must build the same architecture (and the same adapter)")


@torch.no_grad()
def broadcast_tensors(group: SyncGroup, tensors: Sequence[torch.Tensor], *, bucket_bytes: int = BUCKET_BYTES) -> None:
    """Rank 0 sends ``tensors``; every other rank overwrites its own ``tensors`` (same layout) in place."""
    if not tensors:
        return
    sending = group.rank == 0
    _check_layout(group, tensors, tensors[0].device)
    for run in buckets(tensors, bucket_bytes):
        if sending:
            flat = torch.cat([t.reshape(-1) for t in run])
        else:
            flat = torch.empty(sum(t.numel() for t in run), dtype=run[0].dtype, device=run[0].device)
        group.group.broadcast(flat, 0).wait()
        if not sending:
            offset = 0
            for tensor in run:
                tensor.copy_(flat[offset:offset + tensor.numel()].view_as(tensor))
                offset += tensor.numel()


def _host_in_sender(actor: Any, world_size: int, timeout_s: float) -> tuple[str, int]:
    """Run in the sending actor (through Ray's ``__ray_call__``): host the group's store there; its address."""
    from trainers.distributed.cluster import import_ray

    host = import_ray().util.get_node_ip_address()
    actor.weight_sync_store = host_store(host, world_size, timeout_s)
    return host, int(actor.weight_sync_store.port)


def _open_in_sender(actor: Any, host: str, port: int, world_size: int, backend: str, timeout_s: float) -> None:
    """Run in the sending actor: join the group as rank 0, on the store :func:`_host_in_sender` made."""
    actor.weight_sync_group = open_group(host, port, 0, world_size, backend=backend, timeout_s=timeout_s,
                                         store=actor.weight_sync_store)


def _send_from_worker(worker: Any) -> None:
    """Run in a single-rank :class:`~trainers.distributed.train_worker.TrainWorker`: broadcast its
    policy's weights (its adapter under LoRA), the tensors :meth:`GenerationEngine.receive_weights` expects."""
    with worker.policies.active(worker.policy) as model:
        broadcast_tensors(worker.weight_sync_group,
                          sync_tensors(model, adapter=worker.policy if worker.config.model.lora else None))


class EngineBroadcast:
    """A broadcast group of a sender (rank 0) and ``engines`` (actors of
    :class:`~trainers.distributed.engine.GenerationEngine`, ranks 1..n). The sender is this
    process, or ``worker``: a single-rank training worker actor, whose weights then go to the
    engines without passing through this process."""

    def __init__(self, engines: Sequence[Any], *, worker: Any = None, backend: str | None = None,
                 timeout_s: float = 300.0) -> None:
        from trainers.distributed.cluster import get, import_ray

        ray = import_ray()
        self.engines = list(engines)
        self.worker = worker
        self.timeout_s = timeout_s
        self.backend = backend or default_backend()
        world_size = len(self.engines) + 1
        if worker is None:
            host = ray.util.get_node_ip_address()
            store = host_store(host, world_size, timeout_s)
            port = int(store.port)
        else:
            host, port = get(worker.__ray_call__.remote(_host_in_sender, world_size, timeout_s), timeout_s,
                             "the training worker (hosting the weight broadcast's store)")
        joined = [engine.join_weight_group.remote(host, port, rank, world_size, self.backend, timeout_s)
                  for rank, engine in enumerate(self.engines, start=1)]
        if worker is None:
            self.group = open_group(host, port, 0, world_size, backend=self.backend, timeout_s=timeout_s, store=store)
        else:
            joined.append(worker.__ray_call__.remote(_open_in_sender, host, port, world_size, self.backend, timeout_s))
        get(joined, timeout_s, "the generation engines (joining the weight broadcast)")

    def send(self, tensors: Sequence[torch.Tensor] = (), *, bucket_bytes: int = BUCKET_BYTES) -> None:
        """Every engine loads the sender's weights: ``tensors`` from this process, or the worker's policy."""
        from trainers.distributed.cluster import get

        received = [engine.receive_weights.remote() for engine in self.engines]
        if self.worker is None:
            broadcast_tensors(self.group, tensors, bucket_bytes=bucket_bytes)
        else:
            received.append(self.worker.__ray_call__.remote(_send_from_worker))
        get(received, self.timeout_s, "the generation engines (receiving the weight broadcast)")
