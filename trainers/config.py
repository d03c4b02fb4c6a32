"""The trainer's configuration: one dataclass, loadable from YAML, overridable from the CLI.

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

import argparse
import dataclasses
import itertools
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

RolloutMode = Literal["tree", "independent"]
Selection = Literal["greedy", "random"]
GroupBy = Literal["problem_agent_turn", "problem_agent", "problem"]
Normalize = Literal["mean_std", "mean"]
Aggregation = Literal["token_mean", "sequence_mean", "dr_grpo"]
Regime = Literal["shared", "per_role"]
GenerationBackend = Literal["transformers", "vllm"]

#: Instruction variants of the prompt-conditioned mode (docs/design.md §5): each names a
#: different *strategy*, so rollouts of one question disagree in approach, not only in tokens.
DEFAULT_PROMPT_VARIANTS = ("set up an equation", "estimate and check", "work backwards", "write and run code")


@dataclass
class TrainConfig:
    """Everything a training run needs. ``pettingllm train --help`` lists the fields."""

    # ------------------------------------------------------------- task
    env: str = "plan_path_v0"
    """Registered env id (``pettingllm list``). Any PettingZoo AEC env that deep-copies works."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Passed to ``pettingllm_envs.make(env, **env_kwargs)`` (e.g. ``{max_turns: 2, alpha: 0.5}``)."""
    split: str = "train"
    """Split the training problems come from; keep ``test`` for evaluation (docs/design.md trap 6)."""
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
    temperature: float = 1.0
    """Sampling temperature; the trainer scores tokens at the same temperature so that the
    recorded old log-probs and the new ones describe one distribution."""
    max_new_tokens: int = 24
    """Completion budget per action. Small by default so a CPU smoke run finishes in seconds."""
    max_prompt_tokens: int = 4096
    """Prompts longer than this keep their last tokens (the env already cuts very long observations)."""

    prompt_variants: list[str] = field(default_factory=lambda: list(DEFAULT_PROMPT_VARIANTS))
    """Read only by the prompt-conditioned trainer (``pettingllm train-variants``,
    :mod:`trainers.variants`): K instructions that condition the G first-turn rollouts of each
    question round-robin (rollout i gets variant i mod K) on one shared model. The advantage group
    stays the whole question (all variants together), so the model learns which strategy works.
    An empty list (``--prompt-variants '[]'``) is the temperature-only baseline at the same budget."""

    # -------------------------------------------------------- advantages
    group_by: GroupBy = "problem_agent_turn"
    """Group key for advantages. ``problem_agent_turn`` is AT-GRPO's (every sample in a group has
    the same prompt, GRPO's assumption); ``problem_agent`` and ``problem`` pool turns or agents as
    ablations. Every key contains the problem: groups never mix problems (docs/design.md trap 3)."""
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

    # -------------------------------------------------------- optimiser
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

    # ---------------------------------------------------------- policies
    model: str = ""
    """Local path (or hub id when online) of a Hugging Face causal LM with a chat template."""
    regime: Regime = "shared"
    """``shared``: one policy for all roles; ``per_role``: one policy per role (AT-GRPO's
    role-specialised setting). ``policy_map`` overrides both."""
    policy_map: dict[str, str] = field(default_factory=dict)
    """Role -> policy name. Roles with the same name share a policy; empty: derived from ``regime``."""
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
    generation_backend: GenerationBackend = "transformers"
    """``transformers``: sample with the trained model itself (any device, the default).
    ``vllm``: sample with a colocated vLLM engine on the GPU, its weights reloaded from the
    trained model after every update (:mod:`trainers.vllm_backend`); generation is the
    bulk of an RL step, and vLLM's batching and paged KV cache make it several times faster.
    Shared-policy regime only (one engine)."""
    vllm_gpu_memory_utilization: float = 0.3
    """Share of GPU memory the vLLM engine may take; the rest stays for training."""

    # ---------------------------------------------------- run management
    steps: int = 100
    """Training steps (one rollout + one update per step)."""
    seed: int = 0
    """Seeds python, numpy and torch; with ``resume`` the RNG states come from the checkpoint."""
    run_dir: str = "runs/at_grpo"
    """Where ``metrics.jsonl``, TensorBoard events, checkpoints and plots go."""
    checkpoint_every: int = 50
    """Write a checkpoint every K steps (and after the last step); 0: only after the last step."""
    keep_checkpoints: int = 2
    """Most recent checkpoints kept on disk."""
    resume: bool = False
    """Continue from the latest checkpoint in ``run_dir`` exactly as if never stopped."""
    dump_samples: str | None = None
    """JSONL file that receives every training sample (prompt, completion, rewards, advantage)."""
    tensorboard: bool = True
    """Also log to TensorBoard when ``torch.utils.tensorboard`` is importable."""
    progress: bool = True
    """Show a tqdm progress bar."""

    def validate(self) -> None:
        """Raise ``ValueError`` on inconsistent values, early and with the field's name."""
        for name in ("problems_per_step", "n_samples", "max_new_tokens", "micro_batch_size", "ppo_epochs",
                     "max_prompt_tokens", "keep_checkpoints"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.steps < 0 or self.checkpoint_every < 0:
            raise ValueError("steps and checkpoint_every must be >= 0")
        if self.temperature <= 0:
            raise ValueError("temperature must be > 0 (the trainer needs sampling, not argmax)")
        if not (0 <= self.eps_low < 1 and self.eps_high >= 0):
            raise ValueError("eps_low must be in [0, 1) and eps_high >= 0")
        for name in ("rollout", "selection", "group_by", "normalize", "aggregation", "regime", "generation_backend"):
            allowed = typing.get_args(_FIELD_TYPES[name])
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.generation_backend == "vllm" and (self.regime != "shared" or self.policy_map):
            raise ValueError("generation_backend='vllm' supports the shared regime only (one engine, one policy)")
        if not self.model:
            raise ValueError("model is required: a local model directory (pettingllm tiny-model DIR) or a hub id")

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


_FIELD_TYPES: dict[str, Any] = typing.get_type_hints(TrainConfig)


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean, got {text!r}")


def _parse_mapping(text: str) -> dict[str, Any]:
    import yaml

    value = yaml.safe_load(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a YAML mapping like '{{rows: 4}}', got {text!r}")
    return value


def _parse_list(text: str) -> list[str]:
    import yaml

    value = yaml.safe_load(text)
    if value is None:
        return []
    if not isinstance(value, list):
        raise argparse.ArgumentTypeError(f"expected a YAML list like '[a, b]', got {text!r}")
    return [str(v) for v in value]


def _converter(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if tp is bool:
        return _parse_bool
    if origin is list:
        return _parse_list
    if tp in (int, float, str):
        return tp
    if origin is dict:
        return _parse_mapping
    if origin is Literal:
        return str
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if len(args) == 1:  # Optional[X]
        return _converter(args[0])
    raise TypeError(f"no command-line converter for {tp}")


def field_docs() -> dict[str, str]:
    """Each field's docstring (the string literal under it), for ``--help``."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(TrainConfig))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in itertools.pairwise(body):
        if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            docs[node.target.id] = " ".join(str(nxt.value.value).split())  # type: ignore[union-attr]
    return docs


def build_parser(prog: str = "pettingllm train") -> argparse.ArgumentParser:
    """``--config FILE.yaml`` plus one ``--field-name VALUE`` option per config field."""
    parser = argparse.ArgumentParser(prog=prog, description="Train LLM policies on an env with AT-GRPO.",
                                     argument_default=argparse.SUPPRESS)
    parser.add_argument("--config", help="YAML file with config fields; command-line options override it")
    docs = field_docs()
    for f in dataclasses.fields(TrainConfig):
        tp = _FIELD_TYPES[f.name]
        kwargs: dict[str, Any] = {"type": _converter(tp), "help": docs.get(f.name, ""), "dest": f.name}
        if typing.get_origin(tp) is Literal:
            kwargs["choices"] = typing.get_args(tp)
        if tp is bool:
            kwargs.update(nargs="?", const=True, metavar="BOOL")  # `--resume` alone means true
        parser.add_argument("--" + f.name.replace("_", "-"), **kwargs)
    return parser


def load_config(argv: Sequence[str] | None = None, *, base: dict[str, Any] | None = None) -> TrainConfig:
    """Defaults < ``base`` < ``--config`` YAML < command-line options; validated."""
    args = vars(build_parser().parse_args(list(argv or [])))
    values: dict[str, Any] = dict(base or {})
    config_file = args.pop("config", None)
    if config_file:
        import yaml

        loaded = yaml.safe_load(Path(config_file).read_text()) or {}
        unknown = set(loaded) - {f.name for f in dataclasses.fields(TrainConfig)}
        if unknown:
            raise ValueError(f"unknown config keys in {config_file}: {sorted(unknown)}")
        values.update(loaded)
    values.update(args)
    config = TrainConfig(**values)
    config.validate()
    return config
