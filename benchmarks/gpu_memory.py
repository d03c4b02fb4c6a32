"""GPU memory of a run, computed per device from the model's shape and the run's options.

A recipe's memory table (recipes/gpu/README.md) is this module's output, not a guess: for a
policy's **training rank** (FSDP2 over ``train_workers_per_policy`` ranks,
:mod:`trainers.distributed.data_parallel`) and for a **vLLM engine**, the bytes of each part:

* ``weights``, ``gradients``, ``adamw``: the trained parameters are float32 master weights
  (:mod:`trainers.models.policy_set`), their gradients float32 and AdamW's two moments float32,
  each sharded 1/T over the policy's T ranks. Under LoRA only the adapters are trained (sharded
  likewise) and the frozen base is a full bf16 copy on every rank (FSDP's ``ignored_params``).
* ``gathered``: what FSDP2 holds whole for a moment: the root unit (embeddings, final norm; tied
  LM head) with its gradient, and two decoder layers (the running one and the prefetched one),
  float32. Nothing under LoRA (the base is never sharded, the adapters are small).
* ``compute_copies``: forwards run under ``torch.autocast`` (bf16), which caches a bf16 copy of
  every float32 weight it casts until the forward ends: 2 bytes per trained parameter.
* ``activations``: tensors autograd keeps for the backward, per token and layer (the tally of
  :meth:`ModelShape.activation_bytes_per_token_layer`), for one micro-batch of
  ``micro_batch_size`` rows of ``max_prompt_tokens + max_new_tokens`` tokens (the data-parallel
  scorer runs prompt and completion in one forward). With gradient checkpointing: every layer's
  float32 input plus two layers' worth (the recomputed layer and its gradients); without: all layers.
* ``logits``: one chunk of ``logprob_chunk_size`` completion tokens through the LM head (bf16
  logits, their float32 copy and logsumexp's float32 exponentials).

An engine holds the bf16 weights (and one bf16 adapter per policy it serves under LoRA); the KV
cache gets ``vllm_kv_cache_gib``, or else what is left of ``vllm_gpu_memory_utilization`` of the
GPU. ``kv_needed`` is the cache for one agent step at once: the engine's share of the step's
prompts, each prompt's KV computed once (prefix caching) plus ``n_samples`` completions; a smaller
cache still works, vLLM then queues sequences. A GPU's figure is the sum of its parts: an upper
bound of the peak, since the activations, the logits chunk and the bf16 copies do not all live at
one moment. Not counted anywhere: the CUDA context (~0.5 GB per process), the allocator's
fragmentation, NCCL buffers and vLLM's activation and CUDA-graph workspace.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.algorithms.atgrpo.config import TrainConfig
from trainers.distributed.config import DistributedConfig

GIB = 1024 ** 3
FP32, BF16 = 4, 2
#: The linear layers of a decoder layer (PEFT's ``all-linear`` adapts every one of them).
LINEARS = 7
#: The parts of :func:`training_memory` a policy holds between updates (the others exist during its update).
RESIDENT = ("weights", "gradients", "adamw", "frozen_base")


@dataclass(frozen=True)
class ModelShape:
    """What memory depends on in a Qwen-style decoder (Qwen2 / Qwen3): values of the model's config.json."""

    name: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    qkv_bias: bool
    """Qwen2 has biases on q, k and v; Qwen3 has none."""
    qk_norm: bool
    """Qwen3 normalises queries and keys per head (an RMSNorm weight of ``head_dim`` each)."""
    model_type: str
    source: str

    def linear_shapes(self) -> list[tuple[int, int]]:
        """(in, out) of a decoder layer's q, k, v, o, gate, up and down projections."""
        h, i, q, kv = self.hidden_size, self.intermediate_size, self.num_heads * self.head_dim, \
            self.num_kv_heads * self.head_dim
        return [(h, q), (h, kv), (h, kv), (q, h), (h, i), (h, i), (i, h)]

    def layer_parameters(self) -> int:
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        weights = sum(a * b for a, b in self.linear_shapes())
        biases = q + 2 * kv if self.qkv_bias else 0
        norms = 2 * self.hidden_size + (2 * self.head_dim if self.qk_norm else 0)
        return weights + biases + norms

    def root_parameters(self) -> int:
        """Embeddings, final norm and (untied) LM head: what is not in a decoder layer."""
        embeddings = self.vocab_size * self.hidden_size
        return embeddings * (1 if self.tie_word_embeddings else 2) + self.hidden_size

    def parameters(self) -> int:
        return self.num_layers * self.layer_parameters() + self.root_parameters()

    def lora_parameters(self, rank: int) -> int:
        """One LoRA adapter on every linear layer of every decoder layer: r * (in + out) each."""
        return self.num_layers * sum(rank * (a + b) for a, b in self.linear_shapes())

    def kv_bytes_per_token(self) -> int:
        """Keys and values of one token in every layer, bf16."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * BF16

    def activation_bytes_per_token_layer(self, lora_r: int = 0) -> int:
        """Bytes autograd keeps per token in one decoder layer under bf16 autocast: each RMSNorm its
        float32 input and normalised output (2 x 2 x 4h), the bf16 casts of the two norms' outputs
        that the projections read (2 x 2h), attention's q, k, v projections, the rotated q and k and
        the attention output (2 x (3q + 3kv)), the MLP's gate, SiLU, up and product (4 x 2i), and
        under LoRA each adapter's rank-r intermediate (7 x 2r)."""
        h, i = self.hidden_size, self.intermediate_size
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return 4 * FP32 * h + 2 * BF16 * h + BF16 * (3 * q + 3 * kv) + 4 * BF16 * i + LINEARS * BF16 * lora_r

    def transformers_config(self) -> dict[str, Any]:
        """The config.json fields that build this shape (``AutoConfig.for_model(**...)``), random weights."""
        config = {"model_type": self.model_type, "hidden_size": self.hidden_size,
                  "intermediate_size": self.intermediate_size, "num_hidden_layers": self.num_layers,
                  "num_attention_heads": self.num_heads, "num_key_value_heads": self.num_kv_heads,
                  "vocab_size": self.vocab_size, "tie_word_embeddings": self.tie_word_embeddings,
                  "max_position_embeddings": 32_768, "rms_norm_eps": 1e-6, "rope_theta": 1_000_000.0,
                  "hidden_act": "silu"}
        if self.model_type == "qwen3":
            config["head_dim"] = self.head_dim
        return config


#: https://huggingface.co/Qwen/Qwen2.5-1.5B-Instruct/blob/main/config.json (model card: 1.54B parameters,
#: 1.31B without embeddings).
QWEN25_1_5B = ModelShape(
    name="Qwen/Qwen2.5-1.5B-Instruct", hidden_size=1536, intermediate_size=8960, num_layers=28, num_heads=12,
    num_kv_heads=2, head_dim=128, vocab_size=151_936, tie_word_embeddings=True, qkv_bias=True, qk_norm=False,
    model_type="qwen2", source="https://huggingface.co/Qwen/Qwen2.5-1.5B-Instruct/blob/main/config.json")
#: https://huggingface.co/Qwen/Qwen3-1.7B/blob/main/config.json (model card: 1.7B parameters, 1.4B without
#: embeddings).
QWEN3_1_7B = ModelShape(
    name="Qwen/Qwen3-1.7B", hidden_size=2048, intermediate_size=6144, num_layers=28, num_heads=16,
    num_kv_heads=8, head_dim=128, vocab_size=151_936, tie_word_embeddings=True, qkv_bias=False, qk_norm=True,
    model_type="qwen3", source="https://huggingface.co/Qwen/Qwen3-1.7B/blob/main/config.json")
SHAPES = {shape.name: shape for shape in (QWEN25_1_5B, QWEN3_1_7B)}


def training_memory(shape: ModelShape, config: TrainConfig, ranks: int, *,
                    sharded: bool | None = None) -> dict[str, int]:
    """Bytes per GPU of one policy's training rank, by part (module docstring), over ``ranks``
    ranks; ``sharded``: wrapped in FSDP2 (by default when ``ranks > 1``: one rank trains unwrapped)."""
    sharded = ranks > 1 if sharded is None else sharded
    tokens = config.update.micro_batch_size * (config.model.max_prompt_tokens + config.model.max_new_tokens)
    lora_r = config.model.lora_r if config.model.lora else 0
    per_layer = shape.activation_bytes_per_token_layer(lora_r) * tokens
    if config.model.gradient_checkpointing:
        activations = shape.num_layers * tokens * shape.hidden_size * FP32 + 2 * per_layer
    else:
        activations = shape.num_layers * per_layer + per_layer
    completion_tokens = config.update.micro_batch_size * config.model.max_new_tokens
    chunk = min(config.model.logprob_chunk_size or completion_tokens, completion_tokens)
    parts = {"logits": chunk * shape.vocab_size * (BF16 + FP32 + FP32), "activations": activations}
    if config.model.lora:
        trained = shape.lora_parameters(config.model.lora_r)
        parts |= {"frozen_base": shape.parameters() * BF16, "gathered": 0}
    else:
        trained = shape.parameters()
        root = shape.root_parameters() * FP32 * 2  # the root's weights and gradient, whole
        parts |= {"frozen_base": 0, "gathered": root + 2 * shape.layer_parameters() * FP32 if sharded else 0}
    parts |= {"weights": -(-trained * FP32 // ranks), "gradients": -(-trained * FP32 // ranks),
              "adamw": -(-2 * trained * FP32 // ranks), "compute_copies": trained * BF16}
    return parts


def engine_memory(shape: ModelShape, config: TrainConfig, engines: int, adapters: int,
                  gpu_bytes: int) -> dict[str, int]:
    """Bytes of one vLLM engine serving ``adapters`` LoRA adapters (0: full weights), one of ``engines``
    engines splitting each call's prompts, on a GPU of ``gpu_bytes``: its ``weights``, its ``kv_budget``
    (``vllm_kv_cache_gib``, else what ``vllm_gpu_memory_utilization`` of the GPU leaves after the
    weights), the ``kv_needed`` for one agent step at once and its ``total``."""
    weights = shape.parameters() * BF16 + adapters * shape.lora_parameters(config.model.lora_r) * BF16
    share = int(config.generation.vllm_gpu_memory_utilization * gpu_bytes)
    kv_cache_gib = config.generation.vllm_kv_cache_gib
    budget = int(kv_cache_gib * GIB) if kv_cache_gib else max(0, share - weights)
    prompts = -(-config.rollout.problems_per_step // engines)
    per_prompt = config.model.max_prompt_tokens + config.rollout.n_samples * config.model.max_new_tokens
    return {"weights": weights, "kv_budget": budget, "kv_needed": prompts * per_prompt * shape.kv_bytes_per_token(),
            "total": weights + budget if config.generation.vllm_kv_cache_gib else share}


@dataclass(frozen=True)
class Row:
    """One line of a recipe's table: a run config, a layout and how the recipe launches them."""

    run: str
    launcher: str
    """``ray`` (``pettingllm train-ray`` with the ``layout`` file's actors) or ``torchrun`` (``nproc`` ranks)."""
    layout: str = ""
    nproc: int = 8
    overrides: tuple[tuple[str, Any], ...] = ()


def read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(path.read_text()) or {}


def train_config(path: Path, overrides: dict[str, Any]) -> TrainConfig:
    """The run's settings as written (read, not validated: the estimate needs the numbers only)."""
    return TrainConfig().with_values(read_yaml(path), source=str(path)).with_values(overrides, source="the row")


def estimate_row(row: Row, root: Path, gpu_bytes: int) -> dict[str, Any]:
    """The per-GPU figures of one row: the busiest training GPU and an engine GPU (GiB)."""
    config = train_config(root / row.run, dict(row.overrides))
    layout = DistributedConfig(**read_yaml(root / row.layout)) if row.layout else DistributedConfig()
    shape = SHAPES[config.model.model]
    roles = 2  # the recipes' envs have two roles, one policy each (per_role)
    # the engines of train-ray and torchrun take merged full weights, LoRA or not: no adapters
    engine = engine_memory(shape, config, 1 if row.launcher == "torchrun" else layout.engines_per_policy, 0,
                           gpu_bytes)
    if row.launcher == "torchrun":
        # every rank trains every policy (their weights and optimiser state stay, the rest comes and
        # goes per update) and rank 0 also runs one engine per policy on its GPU
        train = training_memory(shape, config, row.nproc)
        train = {k: v * roles if k in RESIDENT else v for k, v in train.items()}
        train_gpu = sum(train.values()) + roles * engine["total"]
    else:
        train = training_memory(shape, config, layout.train_workers_per_policy)
        train_gpu = sum(train.values())
    gpus = row.nproc if row.launcher == "torchrun" else roles * (layout.train_workers_per_policy
                                                                  + layout.engines_per_policy)
    return {"model": shape.name, "training": f"LoRA r={config.model.lora_r}" if config.model.lora else "full",
            "layout": f"{row.launcher}, {gpus} GPUs", "params": shape.parameters(), "train": train,
            "train_gpu": train_gpu, "engine": engine}


def gib(value: int) -> str:
    return f"{value / GIB:.1f}"


def table(rows: list[Row], root: Path, gpu_gib: int = 80) -> str:
    """The markdown table of ``rows`` (paths relative to ``root``) on GPUs of ``gpu_gib`` GiB."""
    head = ("| model | training | launcher, GPUs | weights | grads | AdamW | gathered | bf16 copies | frozen base "
            "| activations | logits chunk | **training GPU** | engine weights | KV budget | KV for one step "
            "| **engine GPU** |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in rows:
        e = estimate_row(row, root, gpu_gib * GIB)
        t = e["train"]
        cells = [e["model"], e["training"], e["layout"], gib(t["weights"]), gib(t["gradients"]), gib(t["adamw"]),
                 gib(t["gathered"]), gib(t["compute_copies"]), gib(t["frozen_base"]), gib(t["activations"]),
                 gib(t["logits"]), f"**{gib(e['train_gpu'])}**", gib(e["engine"]["weights"]),
                 gib(e["engine"]["kv_budget"]), gib(e["engine"]["kv_needed"]), f"**{gib(e['engine']['total'])}**"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: The recipes' table (recipes/gpu/README.md between the ``memory-table`` markers): both models, full
#: fine-tuning and LoRA, on one node and on two (Ray), and full fine-tuning under torchrun on one node
#: (rank 0's GPU also holds both engines, so each gets a KV cache of 12 GiB).
RECIPE_DIR = Path(__file__).resolve().parents[1] / "recipes" / "gpu"
_LORA = (("lora", True), ("lora_r", 16), ("lora_alpha", 32))
RECIPE_ROWS = [row for run in ("plan_path_qwen2.5_1.5b_per_role.yaml", "plan_path_qwen3_1.7b_per_role.yaml")
               for row in (Row(run, "ray", "layout_1node.yaml"), Row(run, "ray", "layout_2nodes.yaml"),
                           Row(run, "ray", "layout_1node.yaml", overrides=_LORA),
                           Row(run, "ray", "layout_2nodes.yaml", overrides=_LORA),
                           Row(run, "torchrun", nproc=8, overrides=(("vllm_kv_cache_gib", 12.0),)))]
MARKERS = ("<!-- memory-table -->", "<!-- /memory-table -->")


def readme_with_table(text: str, rendered: str) -> str:
    """``text`` with what lies between :data:`MARKERS` replaced by ``rendered``."""
    start, end = text.index(MARKERS[0]) + len(MARKERS[0]), text.index(MARKERS[1])
    return text[:start] + "\n" + rendered + "\n" + text[end:]


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.gpu_memory [--write]``: print the recipes' table, or write it into
    recipes/gpu/README.md."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_memory", description=main.__doc__)
    parser.add_argument("--write", action="store_true", help="update the table in recipes/gpu/README.md")
    parser.add_argument("--gpu-gib", type=int, default=80, help="memory of one GPU (default: 80)")
    args = parser.parse_args(argv)
    rendered = table(RECIPE_ROWS, RECIPE_DIR, args.gpu_gib)
    if args.write:
        readme = RECIPE_DIR / "README.md"
        readme.write_text(readme_with_table(readme.read_text(), rendered))
    else:
        print(rendered)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
