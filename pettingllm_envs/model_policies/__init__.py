"""Policies backed by a model: an OpenAI-compatible chat endpoint, and the single-agent baseline
that writes every role's action in one reply.

They sit below :mod:`pettingllm_envs.seats`, which builds them from spec strings, and below the
evaluation suite, which runs them; they import only the standard library.
"""

from pettingllm_envs.model_policies.openai_policy import EndpointError, OpenAIChatPolicy
from pettingllm_envs.model_policies.single_agent import SingleAgentPolicy, split_sections

__all__ = ["EndpointError", "OpenAIChatPolicy", "SingleAgentPolicy", "split_sections"]
