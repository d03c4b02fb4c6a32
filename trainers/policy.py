"""LLM policies: Hugging Face causal LMs, one shared or one per role (full copies or LoRA adapters).

A :class:`PolicySet` owns the tokenizer, the trainable policies (by name), their optimisers
and the frozen reference used by the KL term. Roles map to policy names
(``TrainConfig.policy_for_roles``); with ``lora`` every name is one PEFT adapter on a single
frozen base model, otherwise every name is a full model.

Generation is a plain batched sampling loop with a KV cache, written out instead of
``model.generate`` so that (a) the log-probability of every sampled token is recorded at
generation time under exactly the distribution it was drawn from (temperature-scaled
softmax; no hidden top-k/top-p from a generation config), and (b) the torch RNG stream,
and therefore ``--resume``, is under our control. Models stay in ``eval()`` mode: dropout
would make the recorded and recomputed log-probs of the same tokens disagree.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers.modeling_outputs import CausalLMOutputWithPast

from trainers.config import TrainConfig

# transformers 5 renamed the KV-cache argument and output field from ``past_key_values`` to ``cache``.
_CACHE = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


@dataclass
class Generation:
    """One sampled completion."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    """Log-probability of each completion token when it was sampled (PPO's "old" policy)."""
    text: str


def resolve_device(name: str) -> torch.device:
    """``auto`` picks cuda when available."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[list[list[int]], list[list[int]]]:
    """Left-pad token rows to one length; returns ids and the attention mask."""
    width = max(len(r) for r in rows)
    ids = [[pad_id] * (width - len(r)) + list(r) for r in rows]
    mask = [[0] * (width - len(r)) + [1] * len(r) for r in rows]
    return ids, mask


def positions_from_mask(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that ignore left padding, so a padded prompt is encoded like an unpadded one."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


class PolicySet:
    """The trainable policies of a run, their optimisers and the KL reference."""

    def __init__(self, config: TrainConfig, roles: Sequence[str], *, init_dir: str | Path | None = None) -> None:
        """Load ``config.model``; with ``init_dir`` (a checkpoint's ``policies/``) start from its weights."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config = config
        self.role_to_policy = config.policy_for_roles(roles)
        self.names = sorted(set(self.role_to_policy.values()))
        self.device = resolve_device(config.device)
        self.dtype = getattr(torch, config.dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(config.model)
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.tokenizer.eos_token_id)
        self.eos_ids = self._eos_ids()

        def load(path: str | Path) -> torch.nn.Module:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype).to(self.device)
            return model.eval()

        self.models: dict[str, torch.nn.Module] = {}
        self.reference: torch.nn.Module | None = None
        if config.lora:
            from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
            from safetensors.torch import load_file

            targets: str | list[str] = config.lora_target_modules
            if targets != "all-linear":
                targets = [t.strip() for t in targets.split(",") if t.strip()]
            lora_config = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=0.0,
                                     target_modules=targets, task_type="CAUSAL_LM")
            peft_model = get_peft_model(load(config.model), lora_config, adapter_name=self.names[0])
            for name in self.names[1:]:
                peft_model.add_adapter(name, lora_config)
            if init_dir is not None:
                for name in self.names:
                    weights = load_file(str(Path(init_dir) / name / "adapter_model.safetensors"))
                    set_peft_model_state_dict(peft_model, weights, adapter_name=name)
            self.peft_model = peft_model.eval()
            self._params = {name: self._adapter_parameters(name) for name in self.names}
        else:
            for name in self.names:
                self.models[name] = load(Path(init_dir) / name if init_dir is not None else config.model)
            self._params = {name: list(m.parameters()) for name, m in self.models.items()}
            if config.kl_coef > 0:
                self.reference = load(config.model).requires_grad_(False)
        for params in self._params.values():
            for p in params:
                p.requires_grad_(True)
        self.optimizers = {
            name: torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
            for name, params in self._params.items()
        }

    # ------------------------------------------------------------ structure
    def _eos_ids(self) -> list[int]:
        ids = {int(self.tokenizer.eos_token_id)} if self.tokenizer.eos_token_id is not None else set()
        if not ids:
            raise ValueError("the tokenizer has no eos token; completions could never end")
        return sorted(ids)

    def _adapter_parameters(self, name: str) -> list[torch.nn.Parameter]:
        params = [p for n, p in self.peft_model.named_parameters() if f".{name}." in n]
        if not params:
            raise ValueError(f"no LoRA parameters found for adapter {name!r}")
        return params

    def parameters(self, name: str) -> list[torch.nn.Parameter]:
        """The trainable parameters of policy ``name`` (and nothing else)."""
        return self._params[name]

    @contextmanager
    def active(self, name: str) -> Iterator[torch.nn.Module]:
        """The module that computes policy ``name`` (activates its adapter under LoRA)."""
        if self.config.lora:
            self.peft_model.set_adapter(name)
            # PEFT's set_adapter freezes the other adapters; keep every policy trainable.
            for params in self._params.values():
                for p in params:
                    p.requires_grad_(True)
            yield self.peft_model
        else:
            yield self.models[name]

    @contextmanager
    def reference_model(self, name: str) -> Iterator[torch.nn.Module]:
        """The frozen initial policy: the base model with adapters disabled under LoRA."""
        if self.config.lora:
            with self.active(name) as model, model.disable_adapter():
                yield model
        elif self.reference is None:
            raise RuntimeError("no reference model was loaded (kl_coef is 0)")
        else:
            yield self.reference

    # -------------------------------------------------------------- prompts
    def encode_prompt(self, messages: Sequence[dict[str, str]]) -> tuple[str, list[int]]:
        """Chat-template the messages (with the generation prompt); keep the last
        ``max_prompt_tokens`` tokens."""
        if self.tokenizer.chat_template:
            text = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
        else:  # base models without a template: a plain transcript
            text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant: "
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return text, list(ids[-self.config.max_prompt_tokens:])

    # ----------------------------------------------------------- generation
    @torch.no_grad()
    def generate(self, name: str, prompts: Sequence[Sequence[int]], n: int) -> list[Generation]:
        """Sample ``n`` completions of every prompt in one batched call (prompt-major order:
        prompt 0's n completions first)."""
        cfg = self.config
        rows = [list(p) for p in prompts for _ in range(n)]
        ids, mask = left_pad(rows, self.pad_id)
        input_ids = torch.tensor(ids, device=self.device)
        attention = torch.tensor(mask, device=self.device)
        positions = positions_from_mask(attention)
        eos = torch.tensor(self.eos_ids, device=self.device)
        batch = len(rows)
        finished = torch.zeros(batch, dtype=torch.bool, device=self.device)
        tokens: list[torch.Tensor] = []
        logps: list[torch.Tensor] = []
        with self.active(name) as model:
            out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True,
                        logits_to_keep=1)
            next_position = positions[:, -1:] + 1
            for _ in range(cfg.max_new_tokens):
                logp_all = F.log_softmax(out.logits[:, -1].float() / cfg.temperature, dim=-1)
                token = torch.multinomial(logp_all.exp(), 1).squeeze(1)
                token = torch.where(finished, torch.full_like(token, self.pad_id), token)
                tokens.append(token)
                logps.append(logp_all.gather(1, token[:, None]).squeeze(1))
                finished = finished | torch.isin(token, eos)
                if bool(finished.all()) or len(tokens) == cfg.max_new_tokens:
                    break
                attention = torch.cat([attention, torch.ones_like(attention[:, :1])], dim=1)
                out = model(input_ids=token[:, None], attention_mask=attention, position_ids=next_position,
                            use_cache=True, **{_CACHE: getattr(out, _CACHE)})
                next_position = next_position + 1
        token_rows = torch.stack(tokens, dim=1).tolist()
        logp_rows = torch.stack(logps, dim=1).tolist()
        generations = []
        for row, token_row, logp_row in zip(rows, token_rows, logp_rows, strict=True):
            length = len(token_row)
            for t, tok in enumerate(token_row):
                if tok in self.eos_ids:
                    length = t + 1  # the eos is part of the completion: the model learns to stop
                    break
            completion = token_row[:length]
            text = self.tokenizer.decode(completion, skip_special_tokens=True)
            generations.append(Generation(row, completion, logp_row[:length], text))
        return generations

    # ------------------------------------------------------------- scoring
    def token_logprobs(
        self, model: torch.nn.Module, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs ``[B, C]`` of the completion tokens under ``model`` (at the sampling
        temperature) and their mask. Prompts are left-padded and completions right-padded,
        so every completion starts in the same column and only ``C + 1`` positions of
        logits are computed."""
        width = max(len(c) for c in completions)
        ids, mask = left_pad(prompts, self.pad_id)
        for row, row_mask, completion in zip(ids, mask, completions, strict=True):
            row.extend(list(completion) + [self.pad_id] * (width - len(completion)))
            row_mask.extend([1] * len(completion) + [0] * (width - len(completion)))
        input_ids = torch.tensor(ids, device=self.device)
        attention = torch.tensor(mask, device=self.device)
        logits = model(input_ids=input_ids, attention_mask=attention, position_ids=positions_from_mask(attention),
                       logits_to_keep=width + 1).logits[:, :-1]
        logp = F.log_softmax(logits.float() / self.config.temperature, dim=-1)
        targets = input_ids[:, -width:]
        return logp.gather(2, targets[..., None]).squeeze(2), attention[:, -width:].float()

    # ----------------------------------------------------------- checkpoints
    def save(self, directory: Path) -> None:
        """Write every policy to ``directory/<name>/`` in a format ``from_pretrained`` loads
        (a full model, or a PEFT adapter directory)."""
        for name in self.names:
            target = directory / name
            if self.config.lora:
                from peft import get_peft_model_state_dict
                from safetensors.torch import save_file

                target.mkdir(parents=True, exist_ok=True)
                weights = get_peft_model_state_dict(self.peft_model, adapter_name=name)
                save_file({k: v.detach().cpu().contiguous() for k, v in weights.items()},
                          str(target / "adapter_model.safetensors"))
                self.peft_model.peft_config[name].save_pretrained(str(target))
            else:
                self.models[name].save_pretrained(target)
                self.tokenizer.save_pretrained(target)

    def optimizer_state(self) -> dict[str, Any]:
        return {name: opt.state_dict() for name, opt in self.optimizers.items()}

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        for name, opt in self.optimizers.items():
            opt.load_state_dict(state[name])

    def describe(self) -> str:
        """One line for logs: which role trains which policy, and how."""
        kind = f"LoRA r={self.config.lora_r} adapters on one base" if self.config.lora else "full models"
        return f"{len(self.names)} policies ({kind}): " + json.dumps(self.role_to_policy)

    def snapshot(self, name: str) -> dict[str, torch.Tensor]:
        """A detached copy of policy ``name``'s trainable parameters (tests, diagnostics)."""
        return {str(i): p.detach().clone() for i, p in enumerate(self._params[name])}

