"""A code_v0 env reset to one named problem: what the code tests and attacks share."""

from __future__ import annotations

from pettingllm_envs.code.code_env import raw_env


def fresh_problem(problem_id: str, **config) -> raw_env:
    """A raw code_v0 env reset to ``problem_id`` (e.g. ``HumanEval/53``), whichever split holds it."""
    env = raw_env(**config)
    for split in ("train", "test"):
        ids = [p.problem_id for p in env.dataset.split(split, env.config.test_percent)]
        if problem_id in ids:
            env.reset(options={"index": ids.index(problem_id), "split": split})
            return env
    raise AssertionError(f"{problem_id} is in neither split")
