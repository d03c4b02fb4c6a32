"""The configuration of research_v0 (:class:`ResearchConfig`): the episode's budgets, the
reward weights of both roles and the size of each generated world; ``validate`` refuses weights
that would let a wrong answer earn more than a right one."""

from __future__ import annotations

from dataclasses import dataclass

from pettingllm_envs.core import TextEnvConfig


@dataclass
class ResearchConfig(TextEnvConfig):
    """Configuration of ``research_v0``."""

    alpha: float = 0.0
    """Weight of the team reward (the final answer is right). 0 by default because the
    main agent's correctness is already in its local reward (``main_correct_weight``) and
    the sub's share is credited at the end (``sub_outcome_weight``); raise it to add the
    team outcome to every action's reward."""
    max_turns: int = 64
    """Safety cap on turns (see ``TextEnvConfig``). The budgets below end an episode first
    with the defaults: it has at most ``max_main_steps * (max_tool_calls + 2)`` actions."""
    hops: int = 0
    """Relations to follow per question: 2 or 3; 0 mixes both."""
    max_delegations: int = 4
    """Most ``DELEGATE`` actions per episode; later ones are invalid (the main must answer)."""
    max_tool_calls: int = 4
    """Non-report sub actions per delegation; the next action must be ``REPORT``."""
    max_main_steps: int = 6
    """Main actions (delegations, answers and invalid ones) before the episode is truncated."""
    main_format_weight: float = 0.2
    """a1 of M-GRPO's main reward: paid when the main agent gives a well-formed final answer."""
    main_correct_weight: float = 1.0
    """a2 of M-GRPO's main reward: paid when the final answer is right."""
    report_reward: float = 0.5
    """Paid to the sub for a report that answers its sub-question (a correct hop)."""
    tool_call_reward: float = 0.05
    """Paid to the sub for a tool call, in a useful delegation, that serves its sub-question (reads
    a hop of it no earlier call read, :mod:`.tool_credit`); ``parsed["found"]`` says whether it was paid."""
    sub_outcome_weight: float = 0.5
    """Weight of the main agent's final correctness in each delegation's sub reward."""
    search_results: int = 5
    """Entities a ``SEARCH`` returns at most."""
    people: int = 10
    """People in each generated world (cities, countries, companies, universities below)."""
    cities: int = 6
    countries: int = 3
    companies: int = 5
    universities: int = 3

    def validate(self) -> None:
        super().validate()
        if self.hops not in (0, 2, 3):
            raise ValueError(f"hops must be 0 (mixed), 2 or 3, got {self.hops}")
        if self.max_delegations < 1 or self.max_tool_calls < 0 or self.max_main_steps < 1:
            raise ValueError("max_delegations and max_main_steps must be >= 1, max_tool_calls >= 0")
        weights = (self.main_format_weight, self.main_correct_weight, self.report_reward, self.tool_call_reward,
                   self.sub_outcome_weight)
        if min(weights) < 0:
            raise ValueError("reward weights must be >= 0, or a right answer could earn less than a wrong one")
        if self.search_results < 1:
            raise ValueError("search_results must be >= 1")
        if min(self.people, self.cities, self.countries, self.companies, self.universities) < 1:
            raise ValueError("every entity type needs at least one entity")
        if self.cities < self.countries:
            raise ValueError("every country needs a city: cities must be >= countries")
