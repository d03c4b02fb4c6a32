"""The ``pettingllm`` command line, run as a user would."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pettingllm_envs.cli import main


def test_list_shows_every_env_with_roles(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "plan_path_v0" in out and "tool, planner" in out


def test_run_prints_a_summary_table(capsys):
    assert main(["run", "plan_path_v0", "--episodes", "3"]) == 0
    out = capsys.readouterr().out
    assert "success" in out and "plan_path_v0  1.00" in out


def test_run_with_random_policy_fails_the_task(capsys):
    assert main(["run", "plan_path_v0", "--episodes", "3", "--policy", "random"]) == 0
    assert "plan_path_v0  0.00" in capsys.readouterr().out


def test_play_a_role_from_the_terminal():
    moves = "MOVES: U\n.\n" * 4
    proc = subprocess.run([sys.executable, "-m", "pettingllm_envs", "play", "plan_path_v0", "--role", "planner"],
                          input=moves, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Walker at (row, col)" in proc.stdout and "--- tool (scripted) ---" in proc.stdout
    assert "episode over" in proc.stdout


def test_play_rejects_an_unknown_role(capsys):
    assert main(["play", "plan_path_v0", "--role", "captain"]) == 2


def test_tiny_model_loads_with_from_pretrained(tmp_path):
    transformers = pytest.importorskip("transformers")
    assert main(["tiny-model", str(tmp_path / "tiny")]) == 0
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "tiny")
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "tiny")
    text = "MOVES: U R\n```python\nprint('é')\n```"
    ids = tokenizer(text).input_ids
    assert tokenizer.decode(ids, skip_special_tokens=True) == text
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                           add_generation_prompt=True)
    assert prompt.endswith("<|assistant|>")
    assert model.config.num_hidden_layers == 2 and model.config.vocab_size == len(tokenizer)
