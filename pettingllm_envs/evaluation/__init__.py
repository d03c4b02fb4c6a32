"""Evaluation: the benchmark suite (every env by every policy), with the model-backed policies it runs."""

from pettingllm_envs.evaluation.suite import SuiteConfig, run_suite
from pettingllm_envs.model_policies import EndpointError, OpenAIChatPolicy, SingleAgentPolicy, split_sections

__all__ = ["EndpointError", "OpenAIChatPolicy", "SingleAgentPolicy", "SuiteConfig", "run_suite", "split_sections"]
