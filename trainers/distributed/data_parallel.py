"""Data-parallel training of one policy with FSDP2 (``fully_shard``) or DDP, around the project's one update.

Every rank of a torch.distributed group builds the same :class:`~trainers.models.policy_set.PolicySet`
(one policy), wraps it in a :class:`DataParallelPolicy` and runs
:func:`trainers.learning.update.ppo_update` on its own shard of the samples. The wrapper is what
the update reads of a policy set (``parameters``, ``optimizers``, ``active``, ``reference_model``,
``token_logprobs``, ``pad_id``), so the update's maths is the single-process one:

* ``fsdp``: ``fully_shard`` on every decoder layer and on the root. Each rank stores 1/N of every
  trained weight, its gradient and its AdamW state (the optimiser is built on the sharded
  parameters), so a policy whose weights, gradients and optimiser state do not fit one device
  trains on N. Gradients are reduce-scattered as **sums** (``set_gradient_divide_factor(1)``): the
  loss is already divided by the whole batch's normalisers.
* ``ddp``: ``DistributedDataParallel``, every rank a full replica; gradients all-reduced as sums
  in DDP's buckets (a communication hook: DDP itself averages), once per epoch: the epoch's other
  micro-batches run under ``no_sync`` (DDP reduces the whole accumulated gradient when it syncs).

``ddp`` is the default (``DistributedConfig.data_parallel``, ``--data-parallel``): where a policy
fits it is faster, one all-reduce per epoch against FSDP's all-gather per layer per forward and
reduce-scatter per backward. Measured on the tiny model, 2 gloo ranks, 9 samples, 2 epochs: 0.16 s
per update with DDP, 0.30 s with FSDP, which stores half the weights and AdamW state per rank
(docs/fsdp.md). Choose ``fsdp`` when a policy's float32 weights, gradients and AdamW state (16
bytes per trained parameter) do not fit one device.

**The root module.** FSDP2 gathers the parameters a module holds directly (embeddings, final norm,
LM head) in that module's forward, and DDP's gradient hooks need its forward too; but the scorer
runs the decoder and then the LM head in chunks, outside the model's own forward
(:mod:`trainers.models.scoring`). Called that way, the LM head met sharded parameters (DTensors)
beside plain tensors and failed. So the root is :class:`ScoringModule`: the model *and* its scorer
in one forward, which is what is sharded (or DDP-wrapped) and called as a whole.

**Lockstep.** A sharded layer's forward is an all-gather and every backward a reduce-scatter (DDP:
an all-reduce), so every rank must run the same modules the same number of times:

* the scorer takes its one-forward path (:func:`trainers.models.scoring.token_logprobs` with
  ``one_forward``): the decoder runs once per micro-batch, whatever the completions' widths (the
  prompt-cache path runs it once or twice);
* the ranks agree on the number of micro-batches (all-reduce MAX, :class:`UpdateHooks`
  ``agree_micro_batches``); a rank past its own samples runs a stand-in micro-batch with zero loss
  (:func:`trainers.learning.update.stand_in_micro_batch`), so shards of any sizes, an empty one
  included, pair up;
* the normalisers (tokens, sequences) are all-reduced, so every rank divides by the whole batch's.

The summed gradients are then the full batch's, every rank clips the same global norm and takes
the same step: the weights equal the single-process update up to float summation order
(tests/trainer/distributed/test_distributed_fsdp.py measures the gap).

**LoRA.** Only the adapters are trained. The frozen base is given to ``fully_shard`` as
``ignored_params``: every rank keeps a full copy of it (it has no gradient and no optimiser state,
so sharding it would save its weights' memory only) and FSDP shards the adapters. This also keeps
each FSDP unit one dtype (FSDP2 needs that), while the base is stored in the compute dtype and
the adapters in float32.

**Full weights** (every rank takes part; rank 0 keeps them): :meth:`DataParallelPolicy.full_state_dict`
gathers the state dict tensor by tensor to the CPU (FSDP2's ``state_dict()`` is always sharded),
which :meth:`~DataParallelPolicy.save` writes in :meth:`PolicySet.save`'s format and the engines load;
:meth:`~DataParallelPolicy.full_weights` all-gathers every unit into the model's modules for a block
(snapshots, merging LoRA for vLLM). The optimiser state is
gathered into the single-process layout (AdamW's ``state_dict`` of full tensors, parameters in the
policy set's order), so a checkpoint resumes on any world size and in the single-process trainer.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor
from torch.nn.parallel import DistributedDataParallel
from transformers.modeling_layers import GradientCheckpointingLayer

from trainers.distributed.config import DataParallel
from trainers.distributed.engine import weight_state
from trainers.learning.settings import UpdateSettings
from trainers.learning.update import UpdateHooks, UpdateStats, ppo_update
from trainers.models.policy_set import PolicySet, adamw
from trainers.models.scoring import token_logprobs


class ScoringModule(torch.nn.Module):
    """A policy's model and its scorer as one module: ``forward(prompts, completions)`` is
    :meth:`PolicySet.token_logprobs` with the one-forward path (module docstring)."""

    def __init__(self, model: torch.nn.Module, policies: PolicySet) -> None:
        super().__init__()
        self.model = model
        spec = policies.spec
        self.score = functools.partial(token_logprobs, pad_id=policies.pad_id, device=policies.device,
                                       compute_dtype=policies.compute_dtype, temperature=spec.temperature,
                                       chunk_size=spec.logprob_chunk_size, checkpointed=spec.gradient_checkpointing,
                                       one_forward=True)

    def forward(self, prompts: Sequence[Sequence[int]],
                completions: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.score(self.model, prompts, completions)


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The decoder layers of a transformers causal LM (each layer is an FSDP unit)."""
    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def shard(root: ScoringModule, frozen: set[torch.nn.Parameter]) -> None:
    """``fully_shard`` every decoder layer, then the root, leaving ``frozen`` out (``ignored_params``);
    gradients reduce as sums."""
    for layer in decoder_layers(root.model):
        fully_shard(layer, ignored_params=frozen & set(layer.parameters()) or None)
    fully_shard(root, ignored_params=frozen or None)
    for unit in root.modules():
        if isinstance(unit, FSDPModule):
            unit.set_gradient_divide_factor(1.0)
            unit.set_force_sum_reduction_for_comms(True)  # a plain SUM: gloo has no pre-multiplied sum


def _sum_buckets(state, bucket):  # type: ignore[no-untyped-def]
    """DDP communication hook: SUM-all-reduce a gradient bucket (a ``dist.GradBucket``; DDP's own
    hook divides by the world size) into a ``Future[Tensor]``. Unannotated: DDP compares the
    annotations with those classes, and postponed annotations are strings."""
    work = dist.all_reduce(bucket.buffer(), async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def all_reduce_totals(tokens: float, sequences: float, *, device: torch.device) -> tuple[float, float]:
    """The whole batch's normalisers: the ranks' token and sequence counts summed (float64,
    exact for any count a batch can have), on ``device`` (NCCL reduces GPU tensors only)."""
    totals = torch.tensor([tokens, sequences], dtype=torch.float64, device=device)
    dist.all_reduce(totals, op=dist.ReduceOp.SUM)
    return float(totals[0]), float(totals[1])


def all_reduce_max(count: int, *, device: torch.device) -> int:
    """The largest ``count`` of any rank."""
    value = torch.tensor([count], dtype=torch.int64, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return int(value[0])


def _full(value: Any) -> Any:
    return value.full_tensor() if isinstance(value, DTensor) else value


class DataParallelPolicy:
    """Policy ``name`` of ``policies`` (a set holding that policy alone), wrapped for data-parallel
    training on the default process group (module docstring). Built on every rank at once."""

    def __init__(self, policies: PolicySet, name: str, mode: DataParallel) -> None:
        self.policies, self.name, self.mode = policies, name, mode
        self.spec = policies.spec
        self.pad_id = policies.pad_id
        self.device = policies.device
        with policies.active(name) as model:
            self.model = model
        trained = policies.parameters(name)
        names = {id(p): n for n, p in model.named_parameters()}
        #: the trained parameters' names, in the policy set's order (the optimiser state's indices)
        self.trained_names = [names[id(p)] for p in trained]
        for param in trained:  # the ranks start from rank 0's weights (a fresh LoRA adapter is random), as DDP does
            dist.broadcast(param.data, src=0)
        self.module = ScoringModule(model, policies)
        self.scorer: torch.nn.Module
        if mode == "fsdp":
            trained_ids = {id(p) for p in trained}
            shard(self.module, {p for p in model.parameters() if id(p) not in trained_ids})
            self.scorer = self.module
        else:
            self.scorer = DistributedDataParallel(self.module, broadcast_buffers=False)
            self.scorer.register_comm_hook(None, _sum_buckets)
        self.micro_batches, self.forwards = 1, 0  # per epoch of the running update, and forwards so far
        self.params = self._named(self.trained_names)  # fully_shard replaced them with sharded ones
        spec = policies.spec
        self.optimizers = {name: adamw(self.params, spec, policies.device)}
        # the policy set's own list and optimiser now name the sharded parameters, so nothing keeps
        # the unsharded originals alive (under FSDP they would hold a whole copy of the policy)
        trained[:] = self.params
        policies.optimizers[name] = self.optimizers[name]

    def _named(self, names: Sequence[str]) -> list[torch.nn.Parameter]:
        current = dict(self.model.named_parameters())
        return [current[n] for n in names]

    # ------------------------------------------------------- what ppo_update reads
    def parameters(self, name: str) -> list[torch.nn.Parameter]:
        return self.params

    @contextmanager
    def active(self, name: str) -> Iterator[torch.nn.Module]:
        with self.policies.active(name):
            yield self.scorer

    @contextmanager
    def reference_model(self, name: str) -> Iterator[torch.nn.Module]:
        """Under LoRA the wrapped model with its adapters off; else the policy set's (unsharded) copy."""
        with self.policies.reference_model(name) as reference:
            yield self.scorer if reference is self.model else reference

    def token_logprobs(self, model: torch.nn.Module, prompts: Sequence[Sequence[int]],
                       completions: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        if model is not self.scorer:
            return self.policies.token_logprobs(model, prompts, completions)
        if self.mode == "ddp" and torch.is_grad_enabled():
            # DDP all-reduces the whole accumulated .grad in every synced backward, so only the
            # epoch's last micro-batch syncs (each micro-batch runs one forward with gradients)
            self.forwards += 1
            if self.forwards % self.micro_batches:
                with self.scorer.no_sync():  # type: ignore[operator]
                    return model(prompts, completions)
        return model(prompts, completions)

    # --------------------------------------------------------------------- update
    def update(self, samples: Sequence[Any], settings: UpdateSettings) -> UpdateStats:
        """:func:`~trainers.learning.update.ppo_update` on this rank's shard; every rank calls it."""
        hooks = UpdateHooks(reduce_totals=functools.partial(all_reduce_totals, device=self.device),
                            agree_micro_batches=self._agree_micro_batches)
        return ppo_update(self, self.name, samples, settings, hooks=hooks)  # type: ignore[arg-type]

    def _agree_micro_batches(self, count: int) -> int:
        self.micro_batches = all_reduce_max(count, device=self.device)
        self.forwards = 0
        return self.micro_batches

    # ----------------------------------------------- full weights and state (collective)
    @contextmanager
    def full_weights(self) -> Iterator[torch.nn.Module]:
        """The model with every weight whole for this block (all-gathered under FSDP); every rank
        must enter it."""
        units = [m for m in self.module.modules() if isinstance(m, FSDPModule)] if self.mode == "fsdp" else []
        for unit in units:
            unit.unshard()
        try:
            yield self.model
        finally:
            for unit in units:
                unit.reshard()

    def full_state_dict(self, *, keep: bool) -> dict[str, torch.Tensor]:
        """The model's state dict with whole tensors on the CPU (``keep``: on the rank that asked
        for it; the others take part in the gathers and get ``{}``). Tied weights stay one tensor."""
        gathered: dict[int, torch.Tensor] = {}
        out = {}
        for key, value in self.model.state_dict().items():
            if id(value) not in gathered:
                whole = _full(value).detach()
                gathered[id(value)] = whole.cpu() if keep else whole[:0]
            if keep:
                out[key] = gathered[id(value)]
        return out

    def save(self, directory: Path, *, write: bool) -> None:
        """Write the policy where :meth:`PolicySet.save` would, in its format (``write``: this rank
        writes; every rank must call it)."""
        state = self.full_state_dict(keep=write)
        if not write:
            return
        target = directory / self.name
        if self.policies.spec.lora:
            from peft import get_peft_model_state_dict
            from safetensors.torch import save_file

            target.mkdir(parents=True, exist_ok=True)
            adapter = get_peft_model_state_dict(self.model, state_dict=state, adapter_name=self.name)
            save_file({k: v.contiguous() for k, v in adapter.items()}, str(target / "adapter_model.safetensors"))
            self.model.peft_config[self.name].save_pretrained(str(target))
        else:
            self.model.save_pretrained(target, state_dict=state)
            self.policies.tokenizer.save_pretrained(target)

    def engine_weights(self, *, merged: bool, keep: bool) -> Any:
        """What :func:`trainers.distributed.engine.weight_state` gives an unsharded model (``keep``:
        on this rank; every rank must call it)."""
        lora = self.policies.spec.lora
        if lora and merged:  # merging reads the adapters' modules, which full_weights makes whole
            with self.full_weights():
                return weight_state(self.model, self.name, lora=True, merged=True) if keep else None
        state = self.full_state_dict(keep=keep)
        if not keep:
            return None
        if lora:
            from peft import get_peft_model_state_dict

            return get_peft_model_state_dict(self.model, state_dict=state, adapter_name=self.name)
        return list(state.items()) if merged else state

    def snapshot(self) -> dict[str, torch.Tensor]:
        """The trained parameters, whole, keyed as :meth:`PolicySet.snapshot` keys them."""
        with self.full_weights():
            return {str(i): p.detach().clone() for i, p in enumerate(self._named(self.trained_names))}

    def optimizer_state(self) -> dict[str, Any]:
        """``{name: AdamW state_dict}`` with whole tensors: the single-process layout."""
        state = self.optimizers[self.name].state_dict()
        state["state"] = {i: {k: _full(v) for k, v in s.items()} for i, s in state["state"].items()}
        return {self.name: state}

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        """Load a single-process layout state (any world size wrote it): each rank keeps its shard."""
        own = dict(state[self.name])
        sharded = {}
        for i, entry in own["state"].items():
            param = self.params[int(i)]
            sharded[i] = {k: distribute_tensor(v.to(param.device), param.device_mesh, param.placements,
                                               src_data_rank=None)
                          if isinstance(param, DTensor) and torch.is_tensor(v) and v.shape == param.shape else v
                          for k, v in entry.items()}
        own["state"] = sharded
        self.optimizers[self.name].load_state_dict(own)
