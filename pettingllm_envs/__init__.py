"""pettingllm_envs: PettingZoo AEC environments for multi-agent LLM reinforcement learning.

>>> import pettingllm_envs
>>> env = pettingllm_envs.make("plan_path_v0")
>>> env.reset(seed=0)
"""

from pettingllm_envs.registry import list_envs, make, make_parallel, register

__version__ = "0.1.0"
__all__ = ["__version__", "list_envs", "make", "make_parallel", "register"]
