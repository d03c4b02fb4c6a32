"""``pettingllm tiny-model OUT_DIR --tools``: the offline model of TRL's ``environment_factory`` route
(docs/integrations/trl.md), checked with TRL's own tool-calling checks."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl.chat_template_utils import add_response_schema, parse_response, supports_tool_calling

from pettingllm_envs.cli import main

ACTIONS = ["\\boxed{4}", "\\boxed{7}"]


def test_tools_writes_a_model_that_trl_takes_and_whose_replies_are_one_act_call_each(tmp_path, capsys):
    out = tmp_path / "tiny_tool"
    assert main(["tiny-model", str(out), "--tools", "--actions", *ACTIONS]) == 0
    assert "tool-calling model" in capsys.readouterr().out
    tokenizer = add_response_schema(AutoTokenizer.from_pretrained(out))
    assert supports_tool_calling(tokenizer)  # GRPOTrainer refuses the plain tiny model's template here
    model = AutoModelForCausalLM.from_pretrained(out)  # its own generation config, no generation_kwargs
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "2 + 2?"}], add_generation_prompt=True,
                                           return_tensors="pt", return_dict=True)
    torch.manual_seed(0)
    replies = model.generate(**prompt, do_sample=True, num_return_sequences=8, max_new_tokens=16)
    actions = set()
    prefix = prompt["input_ids"][0].tolist()
    for reply in replies[:, len(prefix):].tolist():
        parsed = parse_response(tokenizer, [i for i in reply if i != tokenizer.pad_token_id], prefix=prefix)
        (call,) = parsed["tool_calls"]
        assert call["function"]["name"] == "act"
        actions.add(call["function"]["arguments"]["action"])
    assert actions == set(ACTIONS)  # every candidate is sampled: rewards differ within a group


def test_actions_without_tools_is_a_one_line_error(tmp_path, capsys):
    assert main(["tiny-model", str(tmp_path / "m"), "--actions", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "pettingllm: error: --actions are the tool calls of a --tools model: add --tools"
    assert not (tmp_path / "m").exists()
