"""A tiny offline model that calls a tool, for smoke runs of tool-calling trainers (TRL's
``environment_factory``) without downloading anything.

A random model never writes a well-formed tool call, so a rollout would end before the env
is ever stepped. :func:`write_tiny_tool_model` writes the tiny byte-level model of
``pettingllm tiny-model`` with TRL's shipped Qwen3 chat template (one TRL parses tool calls
for) and one added token per candidate action, whose text is the whole tool call
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``. The generation settings it
returns bias sampling towards those tokens and end the reply right after one, so every reply
is one tool call with an action drawn at random among the candidates: rewards differ within
a group, and the weights (those of every token) still train. The same settings are the folder's
``generation_config.json``, so ``GRPOTrainer(model=<folder>)`` samples tool calls with no
``generation_kwargs`` (transformers fills what TRL leaves unset from the model's generation config).
``pettingllm tiny-model OUT_DIR --tools`` writes it with the defaults below.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Logit bias of the tool-call tokens, and of the end of text right after one.
CALL_BIAS, STOP_BIAS = 30.0, 100.0
#: The tool of ``trainers.integrations.trl_env.environment_factory``: ``act(action: str)``.
TOOL, ARGUMENT = "act", "action"
#: Default candidate actions: the right answers of math_v0's train problems 0 and 1, and a wrong one.
ACTIONS = ("\\boxed{1200}", "\\boxed{4}", "\\boxed{7}")


def write_tiny_tool_model(out_dir: str | Path, tool: str = TOOL, argument: str = ARGUMENT,
                          actions: Sequence[str] = ACTIONS, *, seed: int = 0) -> dict[str, Any]:
    """Write the model to ``out_dir``; returns the ``generation_kwargs`` (for ``GRPOConfig``, and saved
    as the folder's generation config) that make each reply one call ``tool(argument=<one of actions>)``."""
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainers.models.tiny_model import write_tiny_model

    out = write_tiny_model(Path(out_dir), seed=seed)
    tokenizer = AutoTokenizer.from_pretrained(out)
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    calls = [f"<tool_call>\n{json.dumps({'name': tool, 'arguments': {argument: action}})}\n</tool_call>"
             for action in actions]
    tokenizer.add_tokens(calls)
    tokenizer.save_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    ids = tokenizer.convert_tokens_to_ids(calls)
    bias = [[[i], CALL_BIAS] for i in ids] + [[[i, tokenizer.eos_token_id], STOP_BIAS] for i in ids]
    model.generation_config.sequence_bias = bias
    model.save_pretrained(out)
    return {"sequence_bias": bias}
