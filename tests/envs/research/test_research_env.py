"""research_v0: the knowledge base, the main/sub call structure, budgets, rewards and infos.
(The registry-wide conformance tests in test_registry_envs.py also cover it.)"""

from __future__ import annotations

import copy
import random
import re

import pytest

import pettingllm_envs
from pettingllm_envs.core import split_of
from pettingllm_envs.episodes import play_episode
from pettingllm_envs.research.config import ResearchConfig
from pettingllm_envs.research.knowledge_base import (
    HOP_QUESTIONS,
    RELATION_KEYWORDS,
    RELATIONS,
    TEMPLATES,
    generate_kb,
    interpret,
)
from pettingllm_envs.research.oracle import scripted_policy
from pettingllm_envs.research.research_env import raw_env


def fresh(seed: int = 0, **config) -> raw_env:
    env = raw_env(**config)
    env.reset(seed=seed)
    return env


def gold_hop(env: raw_env, hop: int) -> tuple[str, str]:
    """(sub-question, answer) of hop ``hop`` of the current problem."""
    problem = env.instance
    start = problem.entity if hop == 0 else problem.path[hop - 1]
    return HOP_QUESTIONS[problem.chain[hop]].format(e=start), problem.path[hop]


def test_generated_worlds_are_consistent_and_names_never_look_like_relations():
    for seed in range(100):
        kb = generate_kb(random.Random(seed))
        names = [e.name for e in kb.entities]
        assert len(set(names)) == len(names)
        for entity in kb.entities:
            assert [r for r, _ in entity.relations] == [r for r, (src, _) in RELATIONS.items() if src == entity.type]
            for relation, target in entity.relations:
                assert kb.find(target).type == RELATIONS[relation][1]
            assert not any(p.search(entity.name) for p in RELATION_KEYWORDS.values()), entity.name
            assert kb.mentioned(f"What about {entity.name}?") == [entity]
        for country in (e for e in kb.entities if e.type == "country"):
            assert kb.find(country.get("capital")).get("country") == country.name


def test_interpret_reads_every_template_and_hop_question_as_generated():
    for seed in range(60):
        kb = generate_kb(random.Random(seed))
        for template, entity_type, chain in TEMPLATES:
            for entity in (e for e in kb.entities if e.type == entity_type):
                reading = interpret(kb, template.format(e=entity.name))
                assert reading.answer == kb.follow(entity.name, chain)[-1], template
                assert reading.chain == chain
        for relation, question in HOP_QUESTIONS.items():
            entity = next(e for e in kb.entities if e.type == RELATIONS[relation][0])
            assert interpret(kb, question.format(e=entity.name)).answer == entity.get(relation)


def test_interpret_refuses_questions_it_cannot_check():
    kb = generate_kb(random.Random(3))
    person, other = [e for e in kb.entities if e.type == "person"][:2]
    assert interpret(kb, "What is the weather like?").answer is None
    assert "exactly one" in interpret(kb, f"Did {person.name} meet {other.name}?").reason
    assert "no relation" in interpret(kb, f"How tall is {person.name}?").reason
    ambiguous = interpret(kb, f"Where was {person.name} born and where does {person.name} work?")
    if person.get("born_in") != person.get("works_for"):
        assert ambiguous.answer is None and "different answers" in ambiguous.reason


def test_splits_are_disjoint_by_content():
    env = raw_env()
    keys = {split: {env.instance_key(env.load_instance(i, split)) for i in range(150)} for split in ("train", "test")}
    assert not keys["train"] & keys["test"]
    assert all(split_of(k, env.config.test_percent) == "test" for k in keys["test"])
    questions = {env.load_instance(i, "train").question for i in range(50)}
    assert len(questions) == 50


def test_hops_config_sets_the_number_of_delegations_the_oracle_needs():
    for hops in (2, 3):
        env = pettingllm_envs.make("research_v0", hops=hops, split="test")
        for seed in range(10):
            episode = play_episode(env, scripted_policy, seed=seed)
            assert episode.success
            final = episode.final_infos["main"]["research"]
            assert len(final["delegations"]) == hops
            assert all(d["report_correct"] and d["ended"] == "report" for d in final["delegations"])


def test_control_flows_main_to_sub_and_back_with_delegation_indices_in_infos():
    env = fresh(seed=4)
    question, answer = gold_hop(env, 0)
    assert env.agent_selection == "main" and env.infos["sub"]["research"]["delegation"] is None
    env.step(f"I will ask about the first hop.\nDELEGATE: {question}")
    assert env.agent_selection == "sub"
    assert env.infos["sub"]["research"]["delegation"] == 0 and env.infos["sub"]["research"]["sub_step"] == 0
    sub_view = env.observe("sub")
    assert question in sub_view and env.instance.question not in sub_view  # the sub sees its sub-question only
    env.step(f"SEARCH: {env.instance.entity}")
    assert env.agent_selection == "sub"
    last = env.infos["sub"]["last_action"]
    assert last["parsed"]["delegation"] == 0 and last["parsed"]["sub_step"] == 0
    assert last["reward_local"] == 0.0 and not last["parsed"]["found"]  # names only: it reads no hop
    env.step(f"LOOKUP: {env.instance.entity}")
    assert env.instance.entity + " (" in env.observe("sub")
    last = env.infos["sub"]["last_action"]
    assert last["parsed"]["found"] and last["reward_local"] == env.config.tool_call_reward  # reads the hop
    assert "LOOKUP" not in env.observe("main")  # tool results stay with the sub
    env.step(f"REPORT: {answer}")
    last = env.infos["sub"]["last_action"]
    assert last["parsed"]["sub_step"] == 2 and last["parsed"]["correct_hop"]
    assert last["reward_local"] == env.config.report_reward
    assert env.agent_selection == "main" and f"Report: {answer}" in env.observe("main")
    second, _ = gold_hop(env, 1)
    env.step(f"DELEGATE: {second}")
    assert env.infos["sub"]["research"]["delegation"] == 1
    assert question not in env.observe("sub")  # a new delegation is a fresh prompt


def test_every_agent_acts_at_most_once_per_turn():
    """The base class's turn rule with an env-chosen order: a turn ends just before a role
    would act twice, so (agent, turn) identifies one decision (AT-GRPO's group key)."""
    env = pettingllm_envs.make("research_v0", hops=2)
    episode = play_episode(env, scripted_policy, seed=9)
    assert episode.success
    steps = [(r.agent, r.turn) for r in env.unwrapped.history]
    # main delegates, sub looks up | sub reports, main delegates | sub looks up | sub reports, main answers
    assert steps == [("main", 0), ("sub", 0), ("sub", 1), ("main", 1), ("sub", 2), ("sub", 3), ("main", 3)]


def test_tool_budget_ends_a_delegation_without_a_report():
    env = fresh(seed=1, max_tool_calls=2)
    env.step("DELEGATE: " + gold_hop(env, 0)[0])
    env.step("SEARCH: company")
    env.step("not a command")  # an invalid action uses a tool call too
    assert env.infos["sub"]["last_action"]["reward_local"] == -env.config.format_penalty
    assert "REPORT your answer now" in env.observe("sub")
    env.step("LOOKUP: " + env.instance.entity)
    last = env.infos["sub"]["last_action"]
    assert not last["valid"] and "only REPORT" in last["invalid_reason"]
    assert env.agent_selection == "main" and "No report" in env.observe("main")
    summary = env.infos["main"]["research"]["delegations"][0]
    assert summary["ended"] == "budget" and summary["sub_steps"] == 3 and summary["report"] is None


def test_delegation_budget_and_main_step_budget_truncate():
    env = fresh(seed=2, max_delegations=1, max_main_steps=3)
    env.step("DELEGATE: " + gold_hop(env, 0)[0])
    env.step("REPORT: nobody")
    assert not env.infos["sub"]["last_action"]["parsed"]["correct_hop"]
    assert env.infos["sub"]["last_action"]["reward_local"] == 0.0
    assert "give your ANSWER now" in env.observe("main")
    env.step("DELEGATE: " + gold_hop(env, 1)[0])
    last = env.infos["main"]["last_action"]
    assert not last["valid"] and "delegations are used" in last["invalid_reason"]
    assert env.agent_selection == "main"
    env.step("SEARCH: something")
    assert "cannot use SEARCH" in env.infos["main"]["last_action"]["invalid_reason"]
    assert all(env.truncations.values()) and not any(env.terminations.values())
    assert not env.infos["main"]["success"]


def test_main_reward_is_format_plus_correctness_and_sub_gets_the_outcome_share():
    config = {"main_format_weight": 0.3, "main_correct_weight": 2.0, "sub_outcome_weight": 0.25}
    env = pettingllm_envs.make("research_v0", hops=2, **config)
    episode = play_episode(env, scripted_policy, seed=6)
    main_last = episode.final_infos["main"]["last_action"]
    assert main_last["reward_local"] == pytest.approx(0.3 + 2.0) and main_last["parsed"]["correct"]
    delegations = episode.final_infos["sub"]["research"]["delegations"]
    assert [d["reward_outcome"] for d in delegations] == [0.25, 0.25]
    assert episode.total_reward("sub") == pytest.approx(sum(d["reward"] for d in delegations))
    assert episode.total_reward("main") == pytest.approx(0.3 + 2.0)

    wrong = raw_env(hops=2, **config)
    wrong.reset(seed=6)
    wrong.step("Final answer:\n**ANSWER:** somewhere else.")
    assert wrong.infos["main"]["last_action"]["reward_local"] == pytest.approx(0.3)
    assert all(wrong.terminations.values()) and not wrong.infos["main"]["success"]
    assert wrong.rewards["sub"] == 0.0


def test_answers_are_compared_without_case_markdown_or_punctuation():
    env = fresh(seed=8)
    env.step(f"Reasoning...\nDELEGATE: ignored\n**answer:** the {env.instance.answer.upper()}.")
    assert env.infos["main"]["success"] and env.infos["main"]["last_action"]["parsed"]["command"] == "ANSWER"


def test_uncheckable_sub_question_earns_the_report_nothing_and_says_why():
    env = fresh(seed=5)
    env.step("DELEGATE: What is the weather today?")
    env.step("REPORT: " + env.instance.answer)
    parsed = env.infos["sub"]["last_action"]["parsed"]
    assert parsed["checkable"] is False and "entities" in parsed["uncheckable_reason"]
    assert env.infos["sub"]["last_action"]["reward_local"] == 0.0


def test_repeated_or_empty_tool_calls_earn_nothing():
    env = fresh(seed=7)
    env.step("DELEGATE: " + gold_hop(env, 0)[0])
    env.step("LOOKUP: " + env.instance.entity)
    env.step("LOOKUP: " + env.instance.entity.lower())
    last = env.infos["sub"]["last_action"]
    assert last["reward_local"] == 0.0 and not last["parsed"]["found"]
    env.step("LOOKUP: Nobody Atall")
    assert "No entity is named" in env.observe("sub")
    env.step("REPORT: ")
    assert "needs an argument" in env.infos["sub"]["last_action"]["invalid_reason"]


def test_deepcopy_mid_delegation_separates_the_delegations():
    env = fresh(seed=3)
    env.step("DELEGATE: " + gold_hop(env, 0)[0])
    env.step("SEARCH: city")
    clone = copy.deepcopy(env)
    clone.step("REPORT: " + gold_hop(env, 0)[1])
    assert env.agent_selection == "sub" and clone.agent_selection == "main"
    assert env.delegations[0].ended == "open" and clone.delegations[0].ended == "report"
    assert clone.instance is env.instance


def test_oracle_recovers_when_a_delegation_fails():
    """A sub-question that ends without a report (the sub wasted its only tool call) is
    delegated again; the oracle reads its progress from the reports alone."""
    env = pettingllm_envs.make("research_v0", split="test", hops=2, max_tool_calls=1)
    first_sub = iter([True])

    def flaky(observation, agent, info):
        if agent == "sub" and next(first_sub, False):
            return "SEARCH: nothing useful"
        return scripted_policy(observation, agent, info)

    episode = play_episode(env, flaky, seed=0)
    assert episode.success
    assert len(episode.final_infos["main"]["research"]["delegations"]) == 3


def test_config_validation():
    for bad in ({"hops": 1}, {"max_delegations": 0}, {"max_tool_calls": -1}, {"report_reward": -1.0},
                {"cities": 2, "countries": 3}, {"max_main_steps": 0}):
        with pytest.raises(ValueError):
            ResearchConfig(**bad).validate()


def test_observations_follow_the_documented_command_format():
    env = fresh(seed=0)
    instructions = env.role_instructions("main") + env.role_instructions("sub")
    for command in ("DELEGATE:", "ANSWER:", "SEARCH:", "LOOKUP:", "REPORT:"):
        assert command in instructions
    assert re.search(r"^Question: .+\?$", env.observe("main"), re.MULTILINE)


def test_only_tool_calls_that_read_a_hop_of_the_sub_question_are_paid():
    """A call serves its sub-question when it reads one of its hops (a LOOKUP of the entity the
    hop leaves), each hop once per episode; searches and lookups of other entities earn nothing.
    The whole question delegated at once has one hop per relation of its chain."""
    env = fresh(seed=2, hops=2)
    problem = env.instance
    env.step(f"DELEGATE: {problem.question}")
    assert env.delegations[0].useful
    off_chain = next(e.name for e in problem.kb.entities if e.name not in {problem.entity, *problem.path})
    calls = [f"SEARCH: {problem.entity}", f"LOOKUP: {off_chain}", f"LOOKUP: {problem.entity}",
             f"LOOKUP: {problem.entity}"]
    paid = []
    for call in calls:
        env.step(call)
        paid.append(env.infos["sub"]["last_action"]["reward_local"])
    assert paid == [0.0, 0.0, env.config.tool_call_reward, 0.0]
    env.step(f"REPORT: {problem.path[0]}")  # a wrong report: the hop stays open, its lookup stays paid
    env.step(f"DELEGATE: {gold_hop(env, 1)[0]}")
    env.step(f"LOOKUP: {problem.path[0]}")
    assert env.infos["sub"]["last_action"]["reward_local"] == env.config.tool_call_reward
