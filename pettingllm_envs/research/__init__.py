"""Hierarchical research environments: ``research_v0`` (a main agent delegates one-hop
sub-questions to a tool-using sub-agent over a generated knowledge base)."""

from pettingllm_envs.research import research_env as research_v0

__all__ = ["research_v0"]
