"""The scripted oracle of research_v0 (:func:`scripted_policy`): it solves every instance from
observations alone, so the env's views are shown to carry all a policy needs.

The main agent recognises the question's template and delegates one hop at a time, continuing
from the last right report; the sub-agent looks up the entity of its sub-question and reports
the relation's value. It reads the views' text (the env's ``task_view``), nothing else.
"""

from __future__ import annotations

import re
from typing import Any

from pettingllm_envs.research.knowledge_base import HOP_QUESTIONS, TEMPLATES


def _template_pattern(template: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(template).replace(re.escape("{e}"), "(?P<e>.+?)") + "$")


QUESTION_PATTERNS = [(_template_pattern(t), chain) for t, _, chain in TEMPLATES]
HOP_PATTERNS = [(_template_pattern(q), relation) for relation, q in HOP_QUESTIONS.items()]
QUESTION_LINE = re.compile(r"^Question: (.*)$", re.MULTILINE)
DELEGATION_LINES = re.compile(r"^\d+\. Sub-question: (.*)\n   (?:Report: (.*)|No report.*)$", re.MULTILINE)
SUB_QUESTION_LINE = re.compile(r"^Sub-question \d+ from the main agent: (.*)$", re.MULTILINE)


def _match_template(text: str, patterns: list[tuple[re.Pattern[str], Any]]) -> tuple[str, Any] | None:
    """(entity, payload) of the template that matches ``text`` with the shortest entity:
    "In which country was {e} born?" also matches a 3-hop question, with e = "the founder of X"."""
    matches = [(m.group("e"), payload) for pattern, payload in patterns if (m := pattern.match(text))]
    return min(matches, key=lambda item: len(item[0]), default=None)


def _oracle_main(observation: str) -> str:
    question = QUESTION_LINE.search(observation)
    found = _match_template(question.group(1), QUESTION_PATTERNS) if question else None
    if found is None:
        return "ANSWER: unknown"
    (current, chain), hop = found, 0
    for sub_question, report in DELEGATION_LINES.findall(observation):
        if hop < len(chain) and report and sub_question == HOP_QUESTIONS[chain[hop]].format(e=current):
            current, hop = report, hop + 1
    if hop == len(chain):
        return f"ANSWER: {current}"
    return f"DELEGATE: {HOP_QUESTIONS[chain[hop]].format(e=current)}"


def _oracle_sub(observation: str) -> str:
    line = SUB_QUESTION_LINE.search(observation)
    found = _match_template(line.group(1), HOP_PATTERNS) if line else None
    if found is None:
        return "REPORT: unknown"
    entity, relation = found
    block = re.search(rf"^{re.escape(entity)} \(\w+\): .*((?:\n  \w+: .*)+)", observation, re.MULTILINE)
    if block is None:
        return f"LOOKUP: {entity}"
    value = re.search(rf"^  {relation}: (.*)$", block.group(1), re.MULTILINE)
    return f"REPORT: {value.group(1)}" if value else "REPORT: unknown"


def scripted_policy(observation: str, agent: str, info: dict) -> str:
    """Oracle from observations alone: the main agent recognises the question's template and
    delegates one hop at a time (continuing from the last right report); the sub-agent
    looks up the entity of its sub-question and reports the relation's value."""
    return _oracle_main(observation) if agent == "main" else _oracle_sub(observation)
