"""Any pettingllm env as a multi-agent ``verifiers.v1`` environment (``pip install -e '.[verifiers]'``).

verifiers 0.4's ``Env`` is natively multi-agent: an ``EnvConfig`` subclass declares one
``AgentConfig`` field per role, and ``run(task, agents)`` plays one episode by talking to the
agents. :func:`define` builds, for one env id, the three plugin classes verifiers loads by a
taskset id:

* a ``Taskset`` whose tasks are the env's problems (task ``i`` resets the env with ``seed=i``),
* an ``Env`` whose config has one ``AgentConfig`` field per role of the env (the field name is
  the role), plus ``seats`` (roles played by a pettingllm seat instead of a verifiers agent:
  ``scripted``, ``random``, ``openai:<model>@<url>``; see :mod:`pettingllm_envs.seats`) and
  ``frozen`` (agent roles whose traces are not trainable, e.g. a fixed partner model),
* an in-process chat ``Harness``: one model call per turn through verifiers' interception
  server, so the trace records every call (token ids and log-probs too with verifiers' train
  client), with no program to install (the built-in ``null``/``bash`` harnesses run ``uv sync``).

Rewards are per turn: every model action of a role is **one trace**, whose prompt is exactly
the chat the env showed that role on that turn (``info["messages"]``) and whose reward
``env_reward`` is what the env paid the role from that action until its next one (payments
before its first action go to its first trace), so the rewards of a role's traces sum to its
AEC return. ``trace.info`` carries the turn, the role and whether the episode was solved.
That is the AT-GRPO sample: group traces by ``(task, agent.name, turn)`` for turn-level
advantages. ``trace_per="episode"`` keeps one conversation per role instead, fed with the env's
incremental chat (``info["new_messages"]``, append-only, so a server's prefix cache is reused):
its reward is the role's return and each turn's reward is the metric ``reward_turn_<k>``. Where
the env rewrites a view instead of appending to it (``prompt_reset``), the earlier views stay in
the conversation as history. Every role's last trace has the metric ``success`` (won, for a player).

verifiers resolves a taskset id by importing a top-level module that exports the classes
(dotted ids are not accepted). :func:`taskset_id` registers such a module in-process, which is
what :func:`eval_config` does for verifiers' own runner (``run_eval``). For the ``vf-eval``
command, put a two-line module on the path::

    # pettingllm_plan_path.py
    from pettingllm_envs.integrations.verifiers_env import define
    __all__ = define("plan_path_v0", globals())

and run ``PYTHONPATH=. vf-eval pettingllm_plan_path -m MODEL --client.base-url URL --no-push`` (per-role
options as ``--env.<role>.sampling.max-tokens``, a role's own client as ``--env.<role>.client.base-url``,
seats as ``--env.seats '{"tool": "scripted"}'``).
verifiers needs no torch, so this stays in the env package.
"""

from __future__ import annotations

import sys
import types
from contextlib import AsyncExitStack
from typing import Any, Literal

import pydantic
import verifiers.v1 as vf
from openai import AsyncOpenAI
from verifiers.v1.configs.cli.eval import EvalConfig
from verifiers.v1.dialects import parse_message
from verifiers.v1.dialects.chat import message_to_wire

from pettingllm_envs.registry import make
from pettingllm_envs.seats import SeatedEpisode, SeatTurn, make_seat

#: Prefix of the module names :func:`taskset_id` registers (one per env id).
MODULE_PREFIX = "pettingllm_vf_"


class ChatHarnessConfig(vf.HarnessConfig):
    pass


class InProcessChatHarness(vf.Harness[ChatHarnessConfig]):
    """A tool-less chat turn run in the rollout's own process: the segment's conversation goes
    to the interception endpoint as one chat completion (the harness contract allows an
    in-process loop as long as every model call goes through ``endpoint`` + ``secret``)."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx: Any, trace: Any, runtime: Any, endpoint: str, secret: str,
                     mcp_urls: dict[str, str], data: vf.TaskData, tool_interception_url: str | None = None,
                     ) -> vf.ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt:
            messages.extend(message_to_wire(m) for m in prompt)
        async with AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0) as client:
            await client.chat.completions.create(model=ctx.model, messages=messages)
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


class PettingLLMData(vf.TaskData):
    seed: int
    """The problem: the env is reset with ``seed=seed``."""


class PettingLLMTask(vf.Task[PettingLLMData, vf.State, vf.TaskConfig]):
    pass


class PettingLLMTasksetConfig(vf.TasksetConfig):
    env_config: dict[str, Any] = pydantic.Field(default_factory=dict)
    """Keyword arguments of ``pettingllm_envs.make`` (``split``, ``max_turns``, env options)."""
    num_tasks: int = pydantic.Field(100, ge=1)
    """Problems ``first_seed .. first_seed + num_tasks - 1``."""
    first_seed: int = pydantic.Field(0, ge=0)


class PettingLLMEnvConfigBase(vf.EnvConfig):
    seats: dict[str, str] = pydantic.Field(default_factory=dict)
    """Roles played by a pettingllm seat (``scripted``, ``random``, ``openai:<model>@<url>``,
    ``hf:<folder>``) instead of their verifiers agent; the other roles are agents."""
    frozen: list[str] = pydantic.Field(default_factory=list)
    """Agent roles whose traces are marked untrainable (a fixed partner or opponent model)."""
    trace_per: Literal["turn", "episode"] = "turn"
    """``turn``: one trace per model action, prompt = the env's chat of that turn, reward = that
    turn's reward. ``episode``: one conversation per role fed with the incremental chat, reward =
    the role's return, per-turn rewards as metrics."""
    seat_max_tokens: int = pydantic.Field(1024, ge=1)
    """Reply budget of model seats (``openai:``/``hf:``)."""

    @pydantic.model_validator(mode="before")
    @classmethod
    def _role_clients_default_to_chat(cls, data: Any) -> Any:
        """A role's ``client`` without ``type`` is verifiers' chat client (``eval``), as the top-level
        ``--client`` is; verifiers itself rejects it with ``Unable to extract tag using discriminator
        'type'`` (``--env.<role>.client.type train`` still picks the train client)."""
        if not isinstance(data, dict):
            return data
        roles = set(cls.model_fields) - set(PettingLLMEnvConfigBase.model_fields)
        return {key: _with_client_type(value) if key in roles else value for key, value in data.items()}


def _with_client_type(agent: Any) -> Any:
    """``agent`` (one role's ``AgentConfig`` input) with its ``client`` typed ``eval`` where untyped."""
    if isinstance(agent, dict) and isinstance(agent.get("client"), dict) and "type" not in agent["client"]:
        return {**agent, "client": {"type": "eval", **agent["client"]}}
    return agent


def _split_system(messages: list[dict[str, str]]) -> tuple[str | None, list[dict[str, str]]]:
    """The leading system message's text and the rest of the chat."""
    if messages and messages[0].get("role") == "system":
        return messages[0]["content"], messages[1:]
    return None, messages


class PettingLLMEnvBase(vf.Env[PettingLLMEnvConfigBase]):
    """Plays one episode of a pettingllm env: agent roles through verifiers agents, the
    ``seats`` roles by pettingllm seats in between (:class:`~pettingllm_envs.seats.SeatedEpisode`)."""

    ENV_ID: str = ""

    async def setup(self, agents: vf.Agents) -> None:
        for role in self.config.frozen:
            getattr(agents, role).trainable = False

    def _episode(self, seed: int) -> SeatedEpisode:
        options = self.taskset.config.env_config
        env = make(self.ENV_ID, **options)
        unknown = sorted(set(self.config.seats) - set(env.possible_agents))
        if unknown:
            raise ValueError(f"seats name roles that {self.ENV_ID} does not have: {unknown}")
        seats = {role: make_seat(spec, self.ENV_ID, seed=seed, max_tokens=self.config.seat_max_tokens)
                 for role, spec in self.config.seats.items()}
        learners = [role for role in env.possible_agents if role not in seats]
        return SeatedEpisode(env, seats, learners)

    async def run(self, task: PettingLLMTask, agents: vf.Agents) -> None:
        episode = self._episode(task.data.seed)
        turn = episode.reset(seed=task.data.seed)
        if self.config.trace_per == "turn":
            await self._play_turn_traces(task, agents, episode, turn)
        else:
            await self._play_conversations(task, agents, episode, turn)

    def _role_task(self, task: PettingLLMTask, role: str, turn_index: int, messages: list[dict[str, str]] | None,
                   ) -> PettingLLMTask:
        system, rest = _split_system(messages or [])
        prompt = [parse_message(dict(m)) for m in rest] or None
        data = task.data.model_copy(update={"name": f"{task.data.name}/{role}/{turn_index}",
                                            "system_prompt": system, "prompt": prompt})
        return type(task)(data, task.config)

    async def _play_turn_traces(self, task: PettingLLMTask, agents: vf.Agents, episode: SeatedEpisode,
                                turn: SeatTurn) -> None:
        # A role's return just before each of its actions; a trace is paid the difference to the next one.
        paid_before: dict[str, float] = {}
        last_trace: dict[str, Any] = {}
        turns: dict[str, int] = {}
        while not turn.done:
            role = str(turn.agent)
            if role in last_trace:
                last_trace[role].record_reward("env_reward", episode.returns[role] - paid_before[role])
            paid_before[role] = episode.returns[role] if role in last_trace else 0.0
            index = turns[role] = turns.get(role, -1) + 1
            messages = turn.messages or [{"role": "user", "content": str(turn.observation)}]
            async with getattr(agents, role).interaction(self._role_task(task, role, index, messages)) as talk:
                segment = await talk.turn()
            last_trace[role] = talk.trace
            talk.trace.info.update({"role": role, "turn": index, "seed": task.data.seed})
            turn = episode.act("" if segment.terminated else segment.last_reply)
        self._close_out(episode, turn, last_trace, paid_before)

    async def _play_conversations(self, task: PettingLLMTask, agents: vf.Agents, episode: SeatedEpisode,
                                  turn: SeatTurn) -> None:
        talks: dict[str, Any] = {}
        per_turn: dict[str, list[float]] = {}
        paid_before: dict[str, float] = {}
        async with AsyncExitStack() as stack:
            while not turn.done:
                role = str(turn.agent)
                if role in talks:
                    per_turn[role].append(episode.returns[role] - paid_before[role])
                    message = turn.info.get("new_messages")
                    new = ([parse_message(dict(m)) for m in message if m.get("role") != "system"]
                           if isinstance(message, list) else None)
                    segment = await talks[role].turn(new or turn.new_text or "(no change)")
                else:
                    messages = turn.messages or [{"role": "user", "content": str(turn.observation)}]
                    talks[role] = await stack.enter_async_context(
                        getattr(agents, role).interaction(self._role_task(task, role, 0, messages)))
                    per_turn[role] = []
                    segment = await talks[role].turn()
                paid_before[role] = episode.returns[role] if per_turn[role] else 0.0
                turn = episode.act("" if segment.terminated else segment.last_reply)
        for role, talk in talks.items():
            per_turn[role].append(episode.returns[role] - paid_before[role])
            for index, reward in enumerate(per_turn[role]):
                talk.trace.record_metric(f"reward_turn_{index}", reward)
            talk.trace.record_reward("env_return", episode.returns[role])
            talk.trace.info.update({"role": role, "seed": task.data.seed, "turns": len(per_turn[role])})
            talk.trace.record_metric("success", float(_success(episode, turn, role)))

    def _close_out(self, episode: SeatedEpisode, turn: SeatTurn, last_trace: dict[str, Any],
                   paid_before: dict[str, float]) -> None:
        for role, trace in last_trace.items():
            trace.record_reward("env_reward", episode.returns[role] - paid_before[role])
            trace.record_metric("success", float(_success(episode, turn, role)))


def _success(episode: SeatedEpisode, end: SeatTurn, role: str) -> bool:
    """Whether ``role`` succeeded (won, for a player): pettingllm's envs answer per role; for any
    other AEC env the final info of the learner whose action ended the episode is all there is."""
    raw = episode.env.unwrapped
    if hasattr(raw, "is_success"):
        return bool(raw.is_success(role))
    return bool(end.info.get("success", False))


class PettingLLMTasksetBase(vf.Taskset[PettingLLMTask, PettingLLMTasksetConfig]):
    ENV_ID: str = ""

    def load(self) -> list[PettingLLMTask]:
        first = self.config.first_seed
        return [PettingLLMTask(PettingLLMData(name=f"{self.ENV_ID}#{seed}", seed=seed), self.config.task)
                for seed in range(first, first + self.config.num_tasks)]


def define(env_id: str, namespace: dict[str, Any]) -> list[str]:
    """Put the verifiers plugin classes of ``env_id`` (taskset, env with one ``AgentConfig`` field
    per role, harness) into ``namespace`` (a module's ``globals()``) and return their names, the
    module's ``__all__``."""
    env = make(env_id)
    roles = list(env.possible_agents)
    env.close()
    stem = "".join(part.title() for part in env_id.split("_"))
    agent_fields: dict[str, Any] = {
        role: (vf.AgentConfig, vf.AgentConfig(runtime=vf.SubprocessConfig())) for role in roles}
    config_cls = pydantic.create_model(f"{stem}EnvConfig", __base__=PettingLLMEnvConfigBase, **agent_fields)
    env_cls = types.new_class(f"{stem}Env", (PettingLLMEnvBase, vf.Env[config_cls]), {},
                              lambda ns: ns.update({"ENV_ID": env_id}))
    taskset_cls = types.new_class(f"{stem}Taskset", (PettingLLMTasksetBase,), {},
                                  lambda ns: ns.update({"ENV_ID": env_id}))
    module = namespace.get("__name__", "")
    exported = {cls.__name__: cls for cls in (config_cls, env_cls, taskset_cls)}
    for cls in exported.values():
        cls.__module__ = module
    exported[InProcessChatHarness.__name__] = InProcessChatHarness
    namespace.update(exported)
    return list(exported)


def taskset_id(env_id: str) -> str:
    """The verifiers taskset id of ``env_id``: a top-level module registered in this process
    (verifiers imports plugins by module name)."""
    name = MODULE_PREFIX + env_id
    if name not in sys.modules:
        module = types.ModuleType(name, f"verifiers plugin classes of the pettingllm env {env_id}")
        module.__all__ = define(env_id, module.__dict__)
        sys.modules[name] = module
    return name


def env_config(env_id: str, *, agents: dict[str, dict[str, Any]] | None = None,
               taskset: dict[str, Any] | None = None, **fields: Any) -> vf.EnvConfig:
    """The verifiers ``EnvConfig`` of ``env_id``: ``agents`` overrides each role's ``AgentConfig``
    (``{"planner": {"model": ...}}``), ``taskset`` the taskset config (``env_config``,
    ``num_tasks``, ``first_seed``), ``fields`` the env's own (``seats``, ``frozen``, ``trace_per``)."""
    ident = taskset_id(env_id)
    config_cls = sys.modules[ident].__dict__[next(n for n in sys.modules[ident].__all__ if n.endswith("EnvConfig"))]
    roles = {role: {"runtime": {"type": "subprocess"}, **options} for role, options in (agents or {}).items()}
    return config_cls.model_validate({"taskset": {"id": ident, **(taskset or {})}, **roles, **fields})


def eval_config(env_id: str, *, model: str, base_url: str, output_dir: str, num_tasks: int = 1,
                rollouts: int = 1, client_type: Literal["eval", "train"] = "eval", renderer_model: str | None = None,
                max_tokens: int | None = None, **env_fields: Any) -> EvalConfig:
    """A config for verifiers' own runner (``verifiers.v1.cli.eval.runner.run_eval``): ``num_tasks``
    problems x ``rollouts`` episodes of ``env_id`` against the OpenAI-compatible server at
    ``base_url``, traces under ``output_dir``, nothing pushed. ``client_type="train"`` uses
    verifiers' train client (token ids and log-probs in the traces; the server must serve vLLM's
    ``/inference/v1/generate``), which renders prompts with the tokenizer of ``renderer_model``
    (a hub id or folder; default: ``model``). ``env_fields`` go to :func:`env_config`."""
    env_fields.setdefault("taskset", {})
    env_fields["taskset"] = {"num_tasks": num_tasks, **env_fields["taskset"]}
    sampling = {"max_tokens": max_tokens} if max_tokens else {}
    client: dict[str, Any] = {"type": client_type, "base_url": base_url, "api_key_var": "PETTINGLLM_VF_API_KEY"}
    if client_type == "train" and renderer_model:
        client["renderer_model_name"] = renderer_model
    return EvalConfig.model_validate({
        "env": env_config(env_id, **env_fields), "model": model, "num_rollouts": rollouts, "client": client,
        "sampling": sampling, "push": False, "rich": None, "output_dir": output_dir,
    })
