"""What a research_v0 episode is about and what it opened: the problem (:class:`ResearchProblem`,
a question over its own knowledge base with the gold chain of entities) and each sub-agent call
(:class:`Delegation`, with the checks and credit the env's rewards are read from)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pettingllm_envs.research.knowledge_base import Interpretation, KnowledgeBase


@dataclass(frozen=True)
class ResearchProblem:
    """One question over its own knowledge base."""

    kb: KnowledgeBase
    question: str
    entity: str
    chain: tuple[str, ...]
    path: tuple[str, ...]
    """The entity reached after each hop; the last one is the answer."""

    @property
    def answer(self) -> str:
        return self.path[-1]


@dataclass
class Delegation:
    """One sub-agent call: the sub-question and what the sub did with it."""

    index: int
    question: str
    check: Interpretation
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    """(command, argument, result text) of each non-report action, invalid ones included."""
    steps: int = 0
    report: str | None = None
    report_correct: bool = False
    ended: str = "open"
    """``open``, ``report``, ``budget`` (no report within the budget) or ``episode_end``."""
    reward_own: float = 0.0
    useful: bool = False
    """Checkable, its answer is on the question's chain and not yet credited (see research_env's docstring)."""
    credited: bool = False
    """Its report was a correct hop of a useful delegation (it earned ``report_reward``)."""
