"""Every script in examples/ runs as a user runs it (a subprocess from the repository root), at a
small size, and prints what its docstring promises. A new example without a run here fails
``test_every_example_is_run``, so no example can silently rot when an API it calls changes."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from repo_paths import REPO as ROOT

EXAMPLES = ROOT / "examples"

#: example file -> (its arguments at a small size, regexes its stdout must match)
RUNS: dict[str, tuple[list[str], list[str]]] = {
    "gymnasium_role.py": (["plan_path_v0", "planner", "--episodes", "2"],
                          [r"plan_path_v0 as planner, problem 0: return [+-]\d+\.\d\d in \d+ steps, success True",
                           r"problem 1: .*success True"]),
    "ray_eval.py": (["--episodes", "2", "--workers", "2"],
                    [r"^2 actors$", r"plan_path_v0: 2 episodes on Ray .* success 1\.00; .*identical: True",
                     r"code_v0: 2 episodes on Ray .* success 1\.00; .*identical: True",
                     r"sandbox: 41 programs on Ray .* 40 passed, same verdicts as local: True"]),
    "trl_environment_factory.py": (["--steps", "2", "--problems", "4", "--generations", "2"],
                                   [r"^step 1: reward (-?\d+\.\d{3}) \(env returns \1\), tool calls per rollout [1-9]",
                                    r"^step 2: reward (-?\d+\.\d{3}) \(env returns \1\)"]),
    "trl_grpo_plan_path.py": (["--steps", "1", "--problems", "2", "--generations", "2",
                               "--max-completion-length", "8"],
                              [r"^step 1: reward -?\d+\.\d{3}, success \d\.\d\d$"]),
}


def test_every_example_is_run():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(RUNS)


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(RUNS))
def test_example_runs_and_prints_its_results(example, tmp_path):
    args, expected = RUNS[example]
    env = {**os.environ, "RAY_ADDRESS": ""}  # a local Ray, never a cluster this machine may know of
    proc = subprocess.run([sys.executable, str(EXAMPLES / example), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for pattern in expected:
        assert re.search(pattern, proc.stdout, re.MULTILINE), (pattern, proc.stdout)
