"""The scaling benchmark (benchmarks/scaling_curves.py) runs end to end and writes what the results
page reads, and the tree rollout makes N - 1 deep copies per node (the tree-overhead lever)."""

from __future__ import annotations

import copy
import json

import pytest

from benchmarks import scaling_curves
from benchmarks.results_page import render
from pettingllm_envs.registry import ENV_MODULES
from trainers.rollout.episodes import tree_rollout

POINT_FIELDS = {"n", "turns", "roles", "prompt_chars", "batch", "samples", "tokens", "prompt_tokens_per_sample",
                "distinct_prompt_tokens", "step_s", "step_cpu_s",
                "generate_s", "env_s", "tree_s", "update_s", "s_per_sample", "cpu_s_per_sample",
                "tree_share_of_rollout", "peak_mb", "memory"}


def test_quick_run_writes_every_curve_its_fit_and_the_plot(tmp_path):
    out, png = tmp_path / "scaling_curves.json", tmp_path / "scaling_curves.png"
    results = scaling_curves.main(["--quick", "--out", str(out), "--plot", str(png)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(results))
    assert scaling_curves.RESULT_KEYS.mismatch(results) is None
    assert results["machine"]["torch_threads"] == results["torch_threads"] == 1  # the run's count, not the restored one
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert set(results["shapes"]) == {"tiny"}
    assert scaling_curves.ENV_ID not in ENV_MODULES  # gone after the sweep: registry-wide tests never meet it
    curves = results["shapes"]["tiny"]
    assert set(curves) == set(scaling_curves.SWEEPS)
    for variable, curve in curves.items():
        points = curve["points"]
        assert [p[variable] for p in points] == scaling_curves.QUICK_SWEEPS[variable]
        for p in points:
            assert set(p) == POINT_FIELDS
            assert p["samples"] == p["batch"] * p["n"] * p["roles"] * p["turns"]
            assert p["tokens"] == p["samples"] * scaling_curves.MAX_NEW_TOKENS  # EOS never cuts a completion
            assert p["step_s"] > p["generate_s"] > 0 and p["update_s"] > 0 and p["peak_mb"] >= 0
            assert p["prompt_tokens_per_sample"] > p["prompt_chars"]  # byte-level: a token per character, at least
        others = {k: v for k, v in scaling_curves.BASE.items() if k != variable}
        assert all({k: p[k] for k in others} == others for p in points)  # one variable at a time
        fit = curve["fit"]
        expected = {"n": 1.0, "turns": 1.0, "roles": 1.0, "prompt_chars": 0.0, "batch": 1.0}[variable]
        assert fit["samples_exponent"] == pytest.approx(expected)
        assert fit["flagged"] == (fit["time_per_sample_exponent"] > scaling_curves.TOLERANCE)
    assert results["flagged"] == [f"tiny/{v}" for v, c in curves.items() if c["fit"]["flagged"]]
    page = render(tmp_path)
    assert "Not recorded" in page and "## Scaling curves" in page
    section = page.split("## Scaling curves")[1].split("\n## ")[0]
    assert "Not recorded" not in section and "| tiny | `n` |" in section


def test_slope_is_the_power_law_exponent():
    assert scaling_curves.slope([1, 2, 4, 8], [3 * x**1.5 for x in (1, 2, 4, 8)]) == pytest.approx(1.5)


class CountingCopies:
    """Counts the deep copies of the envs it makes (the tree's own overhead is those copies)."""

    def __init__(self) -> None:
        self.copies = 0
        counter = self

        class Counted(scaling_curves.raw_env):
            def __deepcopy__(self, memo):
                counter.copies += 1
                return super().__deepcopy__(memo)

        self.env_class = Counted

    def __call__(self):
        return self.env_class(roles=2, max_turns=2)


class Text:
    def __init__(self, text: str) -> None:
        self.text = text


def test_a_tree_node_costs_n_minus_one_deep_copies_and_the_samples_do_not_change():
    """The live state is the last branch: N - 1 copies per node, not N, with the same samples and selection
    as N copies (the reference below copies for every branch). The continuations that value every
    branch (trainers/rollout/continuation.py) add one copy per node whose next mover is another
    trained role: the selected branch is played forward on a copy, its siblings on themselves."""
    texts = ["x", "7", "y", "3"]

    def sampler(agent, prompts, n):
        return [[Text(f"{t}{len(prompt[-1]['content'])}") for t in texts[:n]] for prompt in prompts]

    envs = CountingCopies()
    result = tree_rollout(envs, [0, 1], 4, sampler)
    nodes = 2 * 2 * 2  # problems x roles x turns
    continued_on_a_copy = 2 * 3  # per problem every node but the last, after which the episode is over
    assert envs.copies == nodes * 3 + continued_on_a_copy
    reference_envs = CountingCopies()
    reference = tree_rollout(lambda: AlwaysCopied(reference_envs()), [0, 1], 4, sampler)
    assert [(s.problem, s.agent, s.turn, s.branch, s.text, s.reward, s.selected, s.messages) for s in result.samples] \
        == [(s.problem, s.agent, s.turn, s.branch, s.text, s.reward, s.selected, s.messages)
            for s in reference.samples]
    assert [s.selected for s in result.samples[:4]] == [False, True, False, False]  # the first digit wins


class AlwaysCopied:
    """An env whose ``step`` runs on a fresh deep copy: stepping it is stepping a copy, as every branch
    was before the lever."""

    def __init__(self, env) -> None:
        self.__dict__["_env"] = env

    def __getattr__(self, name):
        return getattr(self._env, name)

    def __deepcopy__(self, memo):
        return AlwaysCopied(copy.deepcopy(self._env, memo))

    def step(self, action) -> None:
        self.__dict__["_env"] = copy.deepcopy(self._env)
        self._env.step(action)
