"""Which of the sub-agent's tool calls serve the sub-question it was delegated (research_v0).

A sub-question that :func:`~.knowledge_base.interpret` can check names an entity and a chain
of relations: its *hops* are the (entity, relation) pairs the chain follows, the entity
first, then each entity the chain passes through before the answer. A tool call **serves**
the sub-question when its result shows one of those hops, that is, the relation's value for
that entity: a ``LOOKUP`` of the entity (its description lists every relation). A ``SEARCH``
shows names and descriptions, never a relation, so it answers no hop (it is a way to find a
name, free but unpaid); neither does a ``LOOKUP`` of any other entity.

The env pays ``tool_call_reward`` for a call in a useful delegation that shows a hop no
earlier call of the episode showed, so each hop of the question's chain is paid at most once
per episode and the sub's tool credit over an episode is at most ``hops * tool_call_reward``.
Calls that do not serve the sub-question (irrelevant searches prefixed to a report, lookups
of other entities, the same lookup again) earn nothing, so padding never raises the sub's
return (``tests/adversarial/test_research_padding.py``).
"""

from __future__ import annotations

from pettingllm_envs.research.knowledge_base import Interpretation, KnowledgeBase, normalize

#: (normalised entity name, relation): one step of a chain of relations.
Hop = tuple[str, str]


def question_hops(kb: KnowledgeBase, check: Interpretation) -> tuple[Hop, ...]:
    """The hops of a checkable sub-question's chain, in order; none for an uncheckable one."""
    if check.answer is None or check.entity is None:
        return ()
    entities = [check.entity, *kb.follow(check.entity, check.chain)]
    return tuple((normalize(entity), relation) for entity, relation in zip(entities, check.chain, strict=False))


def read_new_hop(read: set[Hop], command: str, found: str | None, hops: tuple[Hop, ...]) -> bool:
    """Whether a tool call serves its sub-question with a hop not in ``read`` (the hops read so
    far in the episode, which it joins). A ``LOOKUP`` that described the entity named ``found``
    (None: it found none) shows that entity's hops of ``hops``; a ``SEARCH`` shows none."""
    if command != "LOOKUP" or found is None:
        return False
    new = {hop for hop in hops if hop[0] == normalize(found)} - read
    read |= new
    return bool(new)
