"""Train one role of a pettingllm env with TRL's ``GRPOTrainer``.

TRL's GRPO samples ``num_generations`` completions per dataset prompt and scores them
with reward functions. That maps onto our envs as a one-action episode per completion:

* :func:`role_prompt_dataset` resets the env on problems ``0..n-1``, lets the other
  roles act (scripted by default) until it is ``role``'s turn, and stores the chat
  messages the env shows the role (``infos[role]["messages"]``) as the ``prompt``, with
  the problem ``index`` and ``split`` as extra columns.
* :class:`EnvRoleReward` is the reward function: for each completion it resets a fresh
  env on the same problem (seeded resets are reproducible), replays the other roles,
  applies the completion as the role's action and returns the role's reward
  (``alpha * global + local``, plus what the other roles' replies gave it before the
  role's next turn), exactly the reward of :class:`~pettingllm_envs.integrations.RoleEnv`.

All completions of one prompt share problem and history, which is GRPO's assumption, and
the env is the only judge, so any registered env trains this way. Multi-turn training (the
role acting again after feedback, by tool calls) and several roles at once go through TRL's
``environment_factory`` (:mod:`trainers.integrations.trl_env`); tree-structured branching and
per-turn credit are the AT-GRPO trainer's (``pettingllm train``). Needs ``trl`` (the trl extra:
``pip install -e '.[trl]'`` in a checkout).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pettingllm_envs.integrations.gymnasium_env import RoleEnv
from pettingllm_envs.policies import Policy


def role_prompt_dataset(
    env_id: str,
    role: str | None = None,
    indices: Iterable[int] = range(64),
    *,
    split: str = "train",
    other_policies: Policy | Mapping[str, Policy] | None = None,
    **config: Any,
) -> Any:
    """A ``datasets.Dataset`` with columns ``prompt`` (chat messages), ``index`` and ``split``:
    the first observation of ``role`` on each problem of ``indices`` in ``split``."""
    from datasets import Dataset

    env = RoleEnv(env_id, role, other_policies, **config)
    rows: dict[str, list[Any]] = {"prompt": [], "index": [], "split": []}
    for index in indices:
        _, info = env.reset(seed=index, options={"split": split})
        rows["prompt"].append(info["messages"])
        rows["index"].append(index)
        rows["split"].append(split)
    env.close()
    return Dataset.from_dict(rows)


def completion_text(completion: str | list[dict[str, str]]) -> str:
    """The text of a TRL completion: a string, or (conversational) the last message's content."""
    if isinstance(completion, str):
        return completion
    return completion[-1]["content"] if completion else ""


class EnvRoleReward:
    """A TRL reward function that scores each completion as ``role``'s action in the env.

    ``__name__`` (``<env_id>/<role>``) names the reward in TRL's logs; when TRL passes
    ``log_metric``, the fraction of completions that solved the task is logged as
    ``<env_id>/<role>/success``.
    """

    def __init__(
        self,
        env_id: str,
        role: str | None = None,
        other_policies: Policy | Mapping[str, Policy] | None = None,
        **config: Any,
    ) -> None:
        self.env = RoleEnv(env_id, role, other_policies, **config)
        self.__name__ = f"{env_id}/{self.env.role}"

    def __call__(
        self,
        prompts: list[Any],
        completions: list[str | list[dict[str, str]]],
        index: list[int],
        split: list[str],
        log_metric: Callable[[str, float], None] | None = None,
        **_: Any,
    ) -> list[float]:
        rewards, successes = [], 0
        for completion, problem, problem_split in zip(completions, index, split, strict=True):
            self.env.reset(seed=problem, options={"split": problem_split})
            _, reward, _, _, info = self.env.step(completion_text(completion))
            rewards.append(reward)
            successes += bool(info["success"])
        if log_metric is not None and rewards:
            log_metric(f"{self.__name__}/success", successes / len(rewards))
        return rewards
