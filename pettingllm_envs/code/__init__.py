"""Code environments."""

from pettingllm_envs.code import code_env as code_v0

__all__ = ["code_v0"]
