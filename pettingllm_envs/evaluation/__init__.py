"""Evaluation: the benchmark suite (every env by every policy) and model-backed policies."""

from pettingllm_envs.evaluation.openai_policy import EndpointError, OpenAIChatPolicy
from pettingllm_envs.evaluation.single_agent import SingleAgentPolicy, split_sections
from pettingllm_envs.evaluation.suite import SuiteConfig, run_suite

__all__ = ["EndpointError", "OpenAIChatPolicy", "SingleAgentPolicy", "SuiteConfig", "run_suite", "split_sections"]
