"""A code_v0 env reset to one named problem, and the actions and ids the code tests and attacks share."""

from __future__ import annotations

from pettingllm_envs.code.code_env import raw_env

ADD = "HumanEval/53"  # def add(x: int, y: int); hidden tests assert candidate(0, 1) == 1, ...
WRONG_ADD = "```python\ndef add(x, y):\n    if x >= 5:\n        return 0\n    return y + x\n```"


def fence(code: str) -> str:
    """``code`` as the coder or tester writes it: one ```` ```python ```` block."""
    return f"```python\n{code}\n```"


def fresh_problem(problem_id: str = ADD, **config) -> raw_env:
    """A raw code_v0 env reset to ``problem_id`` (e.g. ``HumanEval/53``), whichever split holds it."""
    env = raw_env(**config)
    for split in ("train", "test"):
        ids = [p.problem_id for p in env.dataset.split(split, env.config.test_percent)]
        if problem_id in ids:
            env.reset(options={"index": ids.index(problem_id), "split": split})
            return env
    raise AssertionError(f"{problem_id} is in neither split")
