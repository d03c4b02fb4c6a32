"""AT-GRPO and friends: trainers for multi-agent LLM policies on pettingllm_envs (or any
PettingZoo AEC env). Needs the ``train`` extra (torch, transformers, peft)."""
