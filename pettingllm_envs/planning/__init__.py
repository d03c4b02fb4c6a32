"""Planning environments."""

from pettingllm_envs.planning import plan_path as plan_path_v0
from pettingllm_envs.planning import sokoban as sokoban_v0

__all__ = ["plan_path_v0", "sokoban_v0"]
