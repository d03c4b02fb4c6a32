"""benchmarks/multiturn_vs_trl.py in a quick mode: both trainers really run on the same env and the
file it writes holds what the results page and the docs read (same trained tokens, per-token
and per-group timings, memory)."""

from __future__ import annotations

import json

import pytest

from benchmarks import multiturn_vs_trl


@pytest.mark.slow
def test_a_quick_run_writes_both_sides_with_the_same_trained_tokens(tmp_path):
    out = tmp_path / "multiturn_vs_trl.json"
    results = multiturn_vs_trl.main(["--envs", "math_v0", "--problems", "1", "--n", "2", "--steps", "1",
                                     "--max-turns", "1", "--repeats", "2", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(results))
    assert len(results["machine"]["load_average_before"]) == len(results["machine"]["load_average_after"]) == 3
    entry = results["envs"]["math_v0"]
    ours, trl = entry["ours"], entry["trl"]
    for side in (ours, trl):
        assert side["trained_tokens"] > 0 and side["steps"] >= 1
        assert side["wall_ms_per_trained_token"] == pytest.approx(1000 * side["wall_seconds"] / side["trained_tokens"])
        assert side["peak_rss_mb"] >= side["rss_growth_mb"] >= 0
    # ours trains at least TRL's tokens and stops at the first step that reaches them
    assert sum(ours["step_tokens"]) == ours["trained_tokens"] and len(ours["step_tokens"]) == ours["steps"]
    assert sum(ours["step_tokens"][:-1]) < trl["trained_tokens"] <= ours["trained_tokens"]
    assert ours["max_new_tokens"] == max(1, round(trl["trained_tokens_per_model_turn"]))
    assert entry["speedup_per_trained_token"] == pytest.approx(
        trl["wall_ms_per_trained_token"] / ours["wall_ms_per_trained_token"])
    # two interleaved pairs (TRL, ours, TRL, ours); the entry's sides are the lower-median pair's
    assert results["environment"]["repeats"] == 2 and len(entry["pairs"]) == 2
    assert entry["speedup_per_trained_token"] == min(pair["speedup_per_trained_token"] for pair in entry["pairs"])
