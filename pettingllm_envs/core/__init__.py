"""Building blocks shared by every environment: the text AEC base class, spaces,
split-disjoint instances, parsers and wrappers."""

from pettingllm_envs.core.actions import ActionRecord, ActionResult
from pettingllm_envs.core.env_config import TextEnvConfig
from pettingllm_envs.core.instances import SPLITS, Split, draw_instance, split_of
from pettingllm_envs.core.parsing import extract_code_block
from pettingllm_envs.core.spaces import TextObservation, UnicodeText
from pettingllm_envs.core.text_env import TextAECEnv
from pettingllm_envs.core.wrappers import make_parallel_env, wrap_env

__all__ = [
    "SPLITS",
    "ActionRecord",
    "ActionResult",
    "Split",
    "TextAECEnv",
    "TextEnvConfig",
    "TextObservation",
    "UnicodeText",
    "draw_instance",
    "extract_code_block",
    "make_parallel_env",
    "split_of",
    "wrap_env",
]
