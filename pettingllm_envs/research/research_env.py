"""Research: a main agent delegates one-hop sub-questions to a tool-using sub-agent.

| Property            | Value                                                                        |
|---------------------|------------------------------------------------------------------------------|
| Id / import         | `research_v0` / `from pettingllm_envs.research import research_v0`           |
| Roles               | `main` (planner, acts first), `sub` (tool executor); order chosen by the env |
| Observation         | `TextObservation` (a `str`): main: question, its delegations and reports;    |
|                     | sub: its current sub-question and the results of its tool calls              |
| Action              | `UnicodeText(max_action_chars)`: free text; the last command line counts     |
| main's action       | `DELEGATE: <sub-question>` or `ANSWER: <entity name>`                        |
| sub's action        | `SEARCH: <words>`, `LOOKUP: <entity name>` or `REPORT: <entity name>`        |
| Team state G        | 1 once the main agent's final answer is right, else 0 (same for both)        |
| main's local reward | on ANSWER: `main_format_weight + main_correct_weight * correct`; 0 on a      |
|                     | delegation (M-GRPO's main reward: a1 * format + a2 * correct)                |
| sub's local reward  | in a *useful* delegation (below): `tool_call_reward` per tool call that      |
|                     | reads a new hop of its sub-question (`tool_credit`), `report_reward` for one |
|                     | that answers it; at the end `sub_outcome_weight * correct` per               |
|                     | delegation whose report was credited (the main's final correctness mixed in) |
| Reward bounds       | main: local per action in `[-format_penalty, main_format_weight +            |
|                     | main_correct_weight]`, one answer per episode; sub: local per action in      |
|                     | `[-format_penalty, max(tool_call_reward, report_reward)]`, and its positive  |
|                     | credit over an episode is at most `hops * (report_reward +                   |
|                     | sub_outcome_weight + tool_call_reward)`; global in `{0, 1}`                  |
| Penalties           | `format_penalty`: no command, a command of the other role, an empty or long  |
|                     | argument, a delegation over budget, a tool call when only REPORT is left     |
| Termination         | the main agent answers                                                       |
| Truncation          | the main agent used `max_main_steps` actions without answering (or the      |
|                     | `max_turns` safety cap); a final answer is never given, so no success        |
| Config              | `ResearchConfig`: hops, max_delegations, max_tool_calls, max_main_steps, ... |

**Variable call structure.** The episode starts with ``main``. ``DELEGATE`` opens a
*delegation* and hands control to ``sub``, which acts until it reports (``REPORT``) or
its budget runs out: at most ``max_tool_calls`` non-report actions (tool calls, invalid
ones included) and then one action that must be a report, so a delegation has at most
``max_tool_calls + 1`` sub actions. Then control returns to ``main``. An invalid main
action leaves control with ``main``. The number of delegations per rollout thus varies
from 0 to ``max_delegations``; this is the env's :meth:`~raw_env.next_agent` (the base
class's turn rule keeps every role acting at most once per turn, so (problem, agent,
turn) stays a unique key for AT-GRPO; each sub-question is also a fresh prompt).

**Infos for M-GRPO.** ``infos[agent]["research"]`` holds ``delegation`` (the index of
the open delegation, to which the sub's next action belongs), ``sub_step`` (the sub's
action index within it), ``main_steps`` and, per delegation, a summary with its
question, steps, report, whether the report answered the sub-question, and its rewards:
``reward_own`` (the sum of the sub's local rewards in it), ``reward_outcome``
(``sub_outcome_weight * final correct``) and ``reward`` (their sum). The sub's
``last_action["parsed"]`` also carries ``delegation`` and ``sub_step``. When the episode
ends the sub is credited ``reward_outcome`` once per delegation in ``rewards`` (like a
board game's end-of-game reward), so the sub's AEC return equals the sum of its
delegations' ``reward``. The module's ``delegation`` capability
(:class:`pettingllm_envs.capabilities.Delegation`) is how M-GRPO reads these: ``main``
delegates, ``sub`` serves, and :func:`delegation_served` / :func:`delegation_rewards` read
``parsed["delegation"]`` and the per-delegation ``reward``.

**Checking a sub-agent's report.** The env reads the sub-question with
:func:`~pettingllm_envs.research.knowledge_base.interpret` (one named entity, the
relations its keywords name, composed in the only type-checking order). A report is a
correct hop when it names that answer. An uncheckable sub-question (no entity, several,
ambiguous relations) earns the report nothing and says why in ``parsed``.

**Only progress is credited.** A delegation is *useful* when its sub-question is a step of
the question's chain (it names an entity of the chain and the relations that follow it
there, so its answer is a later entity of the chain) and no earlier report was already
credited with that answer. Only useful delegations earn the sub anything: asking the same
sub-question again, or enumerating correct but irrelevant facts, earns nothing, so a failed
episode never pays the sub more than a solved one. A failed attempt at a hop leaves the hop
open, so a retry is useful again (and earns the credit once).

**Data.** Every problem has its own fictional world (:mod:`.knowledge_base`), so answers
cannot come from memory. Instances are drawn from ``Random(data_seed + index)`` and
split by a hash of the world plus question. The scripted oracle parses the question by
its template, delegates one hop at a time and, as sub, looks the entity up and reports
the relation's value: it solves every instance from observations alone.

**Modules.** How an action is read (:mod:`.commands`), the configuration (:mod:`.config`), the
problem and delegation records (:mod:`.problem`), the knowledge base (:mod:`.knowledge_base`),
which tool calls are paid (:mod:`.tool_credit`) and the oracle (:mod:`.oracle`) live beside
this module, which holds the env itself.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from pettingzoo import AECEnv

from pettingllm_envs.capabilities import Delegation as DelegationCapability
from pettingllm_envs.capabilities import Voting
from pettingllm_envs.core import ActionResult, TextAECEnv, make_parallel_env, wrap_env
from pettingllm_envs.research.commands import command_keys, parse_command
from pettingllm_envs.research.config import ResearchConfig
from pettingllm_envs.research.knowledge_base import (
    RELATIONS,
    TEMPLATES,
    Interpretation,
    generate_kb,
    interpret,
    normalize,
)
from pettingllm_envs.research.oracle import scripted_policy
from pettingllm_envs.research.problem import Delegation, ResearchProblem
from pettingllm_envs.research.tool_credit import Hop, question_hops, read_new_hop

__all__ = ["ResearchConfig", "delegation", "env", "parallel_env", "raw_env", "scripted_policy", "voting"]

ROLES = ("main", "sub")


class raw_env(TextAECEnv[ResearchProblem]):
    """The research environment (see the module docstring)."""

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi"], "name": "research_v0", "is_parallelizable": False
    }
    roles = ROLES
    config_class = ResearchConfig
    config: ResearchConfig

    # ----------------------------------------------------------- instances
    def generate_instance(self, rng: random.Random) -> ResearchProblem:
        cfg = self.config
        kb = generate_kb(rng, people=cfg.people, cities=cfg.cities, countries=cfg.countries,
                         companies=cfg.companies, universities=cfg.universities)
        templates = [t for t in TEMPLATES if cfg.hops in (0, len(t[2]))]
        template, entity_type, chain = rng.choice(templates)
        entity = rng.choice([e.name for e in kb.entities if e.type == entity_type])
        return ResearchProblem(kb, template.format(e=entity), entity, chain, tuple(kb.follow(entity, chain)))

    def instance_key(self, problem: ResearchProblem) -> str:
        return problem.question + "\n" + problem.kb.canonical()

    def start_episode(self, problem: ResearchProblem) -> None:
        self.delegations: list[Delegation] = []
        self.main_steps = 0
        self.final_answer: str | None = None
        self.correct = False
        self.acting_next = "main"
        self.hops_read: set[Hop] = set()

    # -------------------------------------------------------------- actions
    def next_agent(self, agent: str) -> str:
        return self.acting_next

    def is_truncated(self) -> bool:
        return super().is_truncated() or self.main_steps >= self.config.max_main_steps

    @property
    def open_delegation(self) -> Delegation | None:
        if self.delegations and self.delegations[-1].ended == "open":
            return self.delegations[-1]
        return None

    def apply_action(self, agent: str, text: str) -> ActionResult:
        if agent == "main":
            return self._apply_main(text)
        return self._apply_sub(text)

    def _apply_main(self, text: str) -> ActionResult:
        cfg = self.config
        self.main_steps += 1
        command, argument, reason = parse_command("main", text)
        parsed = {"command": command, "argument": argument} if command else None
        if reason is None and command == "DELEGATE" and len(self.delegations) >= cfg.max_delegations:
            reason = f"all {cfg.max_delegations} delegations are used; give your ANSWER"
        if reason is not None:
            return ActionResult(-cfg.format_penalty, valid=False, parsed=parsed, invalid_reason=reason)
        if command == "DELEGATE":
            delegation = Delegation(len(self.delegations), argument, interpret(self.instance.kb, argument))
            delegation.useful = self._is_progress(delegation.check)
            self.delegations.append(delegation)
            self.acting_next = "sub"
            return ActionResult(0.0, parsed={**parsed, "delegation": delegation.index})
        self.final_answer = argument
        self.correct = normalize(argument) == normalize(self.instance.answer)
        for delegation in self.delegations:
            if delegation.ended == "open":
                delegation.ended = "episode_end"
        local = cfg.main_format_weight + cfg.main_correct_weight * self.correct
        return ActionResult(local, parsed={**parsed, "correct": self.correct})

    def _apply_sub(self, text: str) -> ActionResult:
        cfg = self.config
        delegation = self.open_delegation
        if delegation is None:  # unreachable through next_agent; guards direct misuse
            self.acting_next = "main"
            return ActionResult(-cfg.format_penalty, valid=False, invalid_reason="no sub-question is open")
        delegation.steps += 1
        command, argument, reason = parse_command("sub", text)
        parsed: dict[str, Any] = {"command": command, "argument": argument, "delegation": delegation.index,
                                  "sub_step": delegation.steps - 1}
        if reason is None and command == "REPORT":
            result = self._report(delegation, argument, parsed)
        elif len(delegation.calls) >= cfg.max_tool_calls:
            delegation.ended = "budget"
            self.acting_next = "main"
            why = reason or f"{command} is a tool call"
            result = ActionResult(-cfg.format_penalty, valid=False, parsed=parsed, invalid_reason=(
                f"{why}, but the {cfg.max_tool_calls} tool calls of this sub-question were used and only REPORT "
                "was left; the delegation ended without a report"))
        elif reason is not None:
            delegation.calls.append((command or "INVALID", argument, f"invalid: {reason}"))
            result = ActionResult(-cfg.format_penalty, valid=False, parsed=parsed, invalid_reason=reason)
        else:
            found, feedback = self._tool(command, argument, delegation)
            delegation.calls.append((command, argument, feedback))
            result = ActionResult(cfg.tool_call_reward if found else 0.0, parsed={**parsed, "found": found},
                                  feedback=feedback)
        delegation.reward_own += result.local_reward
        return result

    def _is_progress(self, check: Interpretation) -> bool:
        """``check`` follows the question's chain from one of its entities, and no credited
        report has named its answer yet."""
        problem = self.instance
        entities = (problem.entity, *problem.path)
        on_chain = check.answer is not None and check.entity is not None and any(
            normalize(entities[start]) == normalize(check.entity)
            and check.chain == problem.chain[start:start + len(check.chain)]
            for start in range(len(problem.chain))
        )
        return on_chain and not any(d.credited and normalize(d.check.answer) == normalize(check.answer)
                                    for d in self.delegations)

    def _report(self, delegation: Delegation, argument: str, parsed: dict[str, Any]) -> ActionResult:
        check = delegation.check
        delegation.report = argument
        delegation.report_correct = check.answer is not None and normalize(argument) == normalize(check.answer)
        delegation.credited = delegation.useful and delegation.report_correct
        delegation.ended = "report"
        self.acting_next = "main"
        parsed = {**parsed, "checkable": check.answer is not None, "correct_hop": delegation.report_correct,
                  "credited": delegation.credited}
        if check.answer is None:
            parsed["uncheckable_reason"] = check.reason
        elif not delegation.useful:
            parsed["not_credited_reason"] = "the sub-question's answer is not a new step of the question's chain"
        return ActionResult(self.config.report_reward * delegation.credited, parsed=parsed)

    def _tool(self, command: str, argument: str, delegation: Delegation) -> tuple[bool, str]:
        """Run SEARCH or LOOKUP; (whether it earns credit (:mod:`.tool_credit`), the result text)."""
        kb, entity = self.instance.kb, None
        if command == "LOOKUP":
            entity = kb.find(argument)
            if entity is None:
                close = kb.close_names(argument)
                hint = f" Did you mean: {', '.join(close)}?" if close else " Try SEARCH."
                return False, f"No entity is named {argument!r}.{hint}"
            text = kb.describe(entity)
        else:
            hits = kb.search(argument, self.config.search_results)
            if not hits:
                return False, f"No entity matches {argument!r}."
            text = "\n".join(f"{e.name} ({e.type}): {e.description}" for e in hits)
        hops = question_hops(kb, delegation.check) if delegation.useful else ()
        return read_new_hop(self.hops_read, command, entity and entity.name, hops), text

    # ------------------------------------------------------------ rewards
    def step(self, action: Any) -> None:
        """The base step, plus the sub's share of the final outcome when the episode ends."""
        acting = self.agent_selection
        live = not (self.terminations[acting] or self.truncations[acting])
        super().step(action)
        if live and "sub" in self.agents and (self.terminations["sub"] or self.truncations["sub"]):
            for delegation in self.delegations:
                if delegation.ended == "open":
                    delegation.ended = "episode_end"
            credit = self.outcome_credit() * sum(d.credited for d in self.delegations)
            self.rewards["sub"] += credit
            self._cumulative_rewards["sub"] += credit

    def outcome_credit(self) -> float:
        """The main agent's final correctness as mixed into each credited delegation's sub reward."""
        return self.config.sub_outcome_weight * self.correct

    def global_reward(self) -> float:
        return float(self.correct)

    def is_success(self, agent: str | None = None) -> bool:
        return self.correct

    def is_done(self) -> bool:
        return self.final_answer is not None

    def extra_info(self, agent: str) -> dict[str, Any]:
        current = self.open_delegation
        ended = self.final_answer is not None or self.main_steps >= self.config.max_main_steps
        outcome = self.outcome_credit()
        return {
            "research": {
                "delegation": current.index if current is not None else None,
                "sub_step": current.steps if current is not None else None,
                "main_steps": self.main_steps,
                "final_answer": self.final_answer,
                "correct": self.correct,
                "episode_over": ended,
                "delegations": [
                    {
                        "index": d.index, "question": d.question, "sub_steps": d.steps, "tool_calls": len(d.calls),
                        "report": d.report, "checkable": d.check.answer is not None,
                        "report_correct": d.report_correct, "useful": d.useful, "credited": d.credited,
                        "ended": d.ended, "reward_own": d.reward_own,
                        "reward_outcome": outcome * d.credited, "reward": d.reward_own + outcome * d.credited,
                    }
                    for d in self.delegations
                ],
            }
        }

    # -------------------------------------------------------------- views
    def role_instructions(self, agent: str) -> str:
        cfg = self.config
        relations = "; ".join(f"{r} ({a} -> {b})" for r, (a, b) in RELATIONS.items())
        common = (
            "You are on a research team of two agents, a main agent and a sub-agent, that answers a "
            "multi-hop question about a fictional world. Its facts are only in a knowledge base of "
            f"entities (people, cities, countries, companies, universities) with relations: {relations}. "
            "Reply with your reasoning if you like, then ONE command on its own line; only the last "
            "command line counts. Entity names must be written exactly."
        )
        if agent == "main":
            return common + (
                "\nYou are the main agent (the planner). You cannot see the knowledge base. Split the "
                "question into one-hop sub-questions, each about one named entity and one relation, e.g. "
                "'In which city was <person> born?', and delegate them one at a time; the sub-agent "
                "researches each and reports an entity. Commands:\n"
                "DELEGATE: <sub-question>\nANSWER: <entity name>   (your final answer; it ends the episode)\n"
                f"You may delegate at most {cfg.max_delegations} times and act at most {cfg.max_main_steps} "
                "times in all."
            )
        return common + (
            "\nYou are the sub-agent (the tool executor). Answer the sub-question you were given using "
            "the knowledge base tools, then report the answer. Commands:\n"
            f"SEARCH: <words>   (up to {cfg.search_results} entities whose name, type or description share words)\n"
            "LOOKUP: <entity name>   (the entity's description and all its relations)\n"
            "REPORT: <entity name>   (your answer to the sub-question; it goes back to the main agent)\n"
            f"You may make at most {cfg.max_tool_calls} tool calls per sub-question; then you must REPORT."
        )

    def task_view(self, agent: str) -> str:
        if agent == "main":
            return self._main_view()
        return self._sub_view()

    def _main_view(self) -> str:
        cfg = self.config
        parts = [f"Question: {self.instance.question}", ""]
        if self.delegations:
            parts.append(f"Your delegations ({len(self.delegations)} of at most {cfg.max_delegations}):")
            for d in self.delegations:
                parts.append(f"{d.index + 1}. Sub-question: {d.question}")
                if d.report is not None:
                    parts.append(f"   Report: {d.report}")
                elif d.ended == "budget":
                    parts.append(f"   No report (the sub-agent used its {cfg.max_tool_calls} tool calls).")
                else:
                    parts.append("   No report yet.")
        else:
            parts.append("You have not delegated anything yet.")
        last = self.last_record("main")
        if last is not None and not last.result.valid:
            parts.append(f"\nYour previous action was invalid: {last.result.invalid_reason}")
        parts.append(f"\nThis is your action {self.main_steps + 1} of at most {cfg.max_main_steps}.")
        if self.main_steps + 1 >= cfg.max_main_steps or len(self.delegations) >= cfg.max_delegations:
            parts.append("You cannot delegate any more: give your ANSWER now.")
        return "\n".join(parts)

    def _sub_view(self) -> str:
        cfg = self.config
        current = self.open_delegation
        if current is None:
            if self.delegations:
                return "The main agent has no open sub-question for you right now."
            return "The main agent has not delegated a sub-question to you yet."
        parts = [f"Sub-question {current.index + 1} from the main agent: {current.question}", ""]
        if current.calls:
            parts.append("Your tool calls so far:")
            for i, (command, argument, result) in enumerate(current.calls):
                parts.append(f"[{i + 1}] {command}: {argument}\n{result}")
        else:
            parts.append("You have not called a tool yet.")
        left = cfg.max_tool_calls - len(current.calls)
        if left > 0:
            parts.append(f"\nTool calls left for this sub-question: {left}.")
        else:
            parts.append("\nNo tool calls are left: REPORT your answer now.")
        return "\n".join(parts)

    def render_state(self) -> str:
        problem = self.instance
        lines = [f"Q: {problem.question}", f"gold: {' -> '.join((problem.entity, *problem.path))}"]
        for d in self.delegations:
            lines.append(f"  [{d.index}] {d.question!r} -> {d.report!r} (hop correct {d.report_correct}, "
                         f"{len(d.calls)} tool calls, {d.ended})")
        lines.append(f"answer {self.final_answer!r} correct {self.correct} main steps {self.main_steps}")
        return "\n".join(lines)


def env(**config) -> TextAECEnv:
    """The wrapped AEC environment (order enforcing), the usual entry point."""
    return wrap_env(raw_env(**config))


def parallel_env(**config):
    """The Parallel API view: one parallel step is one agent's action (see pettingllm_envs.core)."""
    return make_parallel_env(env(**config))


voting = Voting(keys=command_keys)


def delegation_served(env: AECEnv) -> int:
    """The delegation the sub's last action belongs to (its ``parsed["delegation"]``)."""
    return int(env.infos["sub"]["last_action"]["parsed"]["delegation"])


def delegation_rewards(env: AECEnv) -> list[float]:
    """Each delegation's reward (the sub's own rewards in it plus its share of the outcome)."""
    return [float(d["reward"]) for d in env.infos["main"]["research"]["delegations"]]


delegation = DelegationCapability(manager="main", worker="sub", served=delegation_served, rewards=delegation_rewards)
