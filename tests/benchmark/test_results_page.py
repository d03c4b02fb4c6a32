"""docs/results.md is what benchmarks/results_page.py renders from the committed figure files, so
no figure on it can be typed by hand, and the renderer reads what the benchmarks really write; every
results file says which machine made it (benchmarks/recording.py), and ``--check`` lists the files
and sections that do not."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from repo_paths import REPO

from benchmarks import perf_envs, reasoning_gym_bridge, results_page
from benchmarks.recording import (
    KNOWN_UNITS,
    MACHINE_KEYS,
    ResultKeys,
    has_machine_record,
    start_recording,
    write_results,
)
from benchmarks.results_page import BENCHMARKS, PAGE, RESULTS, Benchmark, machine_described, main, problems, render


def test_the_committed_page_is_what_the_committed_figure_files_render():
    assert PAGE.read_text() == render(), "run python -m benchmarks.results_page and commit docs/results.md"


def test_a_changed_figure_changes_the_page(tmp_path):
    """The page follows the files: a figure edited in a results file shows up, a hand edit of the page does not pass."""
    shutil.copytree(RESULTS, tmp_path, dirs_exist_ok=True)
    learning = tmp_path / "learning" / "learning.json"
    figures = json.loads(learning.read_text())
    condition = next(iter(figures["envs"]["sudoku_v0"]["conditions"].values()))
    condition["summary"]["completions"] = 123_456_789
    learning.write_text(json.dumps(figures))
    assert "123456789" not in render() and "123456789" in render(tmp_path)


def test_every_benchmark_without_a_file_says_how_to_record_it(tmp_path):
    page = render(tmp_path)
    assert page.count("Not recorded in this checkout") == len(BENCHMARKS)
    assert all(f"`{bench.command}` writes `benchmarks/results/{bench.file}`" in page for bench in BENCHMARKS)


def test_the_page_renders_what_the_env_benchmarks_write(tmp_path):
    """Real (short) runs of two benchmarks: every env and dataset they measured is on the page, with its figures
    and the reason of each refused dataset."""
    envs = perf_envs.main(["--episodes", "1", "--copies", "5", "--out", str(tmp_path / "perf_envs.json")])
    datasets = reasoning_gym_bridge.main(["--datasets", "basic_arithmetic", "coin_flip", "--episodes", "1",
                                          "--copies", "5", "--out", str(tmp_path / "reasoning_gym_bridge.json")])
    page = render(tmp_path)
    for env_id, figures in envs["envs"].items():
        assert f"| `{env_id}` | {figures['steps_per_s']:,.0f} |" in page
    assert f"| `basic_arithmetic` | {datasets['datasets']['basic_arithmetic']['new_problem_ms']:,.1f} |" in page
    assert f"- `coin_flip`: {datasets['datasets']['coin_flip']['reason']}" in page
    # What the two write today is what they declare, with the machine record: the check has nothing to say.
    written = [bench for bench in BENCHMARKS if bench.file in ("perf_envs.json", "reasoning_gym_bridge.json")]
    (tmp_path / "results.md").write_text(render(tmp_path, written))
    assert problems(tmp_path, tmp_path / "results.md", written, quoting=[]) == []
    assert page.count("**Machine 1**") == 3  # the index and both sections: one machine ran both


def test_the_machine_record_names_the_cpu_its_units_threads_versions_and_the_load_before_and_after(tmp_path):
    record = start_recording().machine()
    assert set(record) == MACHINE_KEYS
    assert isinstance(record["cpu_model"], str) and record["cpu_model"]
    assert record["units"] == "unknown" or set(record["units"]) <= set(KNOWN_UNITS)
    assert isinstance(record["logical_cpus"], int) and record["logical_cpus"] >= 1
    assert record["usable_cpus"] is None or 1 <= record["usable_cpus"] <= record["logical_cpus"]
    assert "python" in record["versions"] and "pettingzoo" in record["versions"]
    for load in (record["load_average_before"], record["load_average_after"]):
        assert len(load) == 3 and all(isinstance(x, float | int) and x >= 0 for x in load)
    written = write_results(tmp_path / "figures.json", {"figure": 1.5}, start_recording())
    assert json.loads((tmp_path / "figures.json").read_text()) == written
    assert written["figure"] == 1.5 and has_machine_record(written)


def test_versions_are_read_without_importing_the_libraries():
    """torch's thread count is recorded only where the benchmark loaded torch; its version always."""
    code = ("import sys; from benchmarks.recording import describe_machine; d = describe_machine(); "
            "print(d['torch_threads'], 'torch' in d['versions'], 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                          check=True)
    assert done.stdout.split() == ["None", "True", "False"]


WEIGHT_SYNC = next(bench for bench in BENCHMARKS if bench.file == "weight_sync.json")
PERF_ENVS = next(bench for bench in BENCHMARKS if bench.file == "perf_envs.json")


def weight_sync_figures(**changed: Any) -> dict[str, Any]:
    """A results file of benchmarks.weight_sync, figures made up, the keys it writes today."""
    shape = {"parameters": 1000, "megabytes": 0.1, "setup_s": 0.2, "object_store_s": 0.02, "broadcast_s": 0.01,
             "broadcast_speedup": 2.0}
    return {"engines": 2, "repeats": 5, "backend": "gloo", "shapes": {"tiny": shape},
            "machine": start_recording().machine(), **changed}


def checked(tmp_path: Path, files: dict[str, dict[str, Any]], benchmarks: list[Benchmark]) -> list[str]:
    """What the check says of ``files`` under a results folder in ``tmp_path``, the page rendered from them."""
    results = tmp_path / "results"
    results.mkdir()
    for name, figures in files.items():
        (results / name).write_text(json.dumps(figures))
    page = tmp_path / "results.md"
    page.write_text(render(results, benchmarks))
    return problems(results, page, benchmarks, quoting=[])


def test_the_check_passes_a_clean_set(tmp_path):
    assert checked(tmp_path, {"weight_sync.json": weight_sync_figures()}, [WEIGHT_SYNC]) == []


def test_the_check_reports_a_file_without_the_machine_record(tmp_path):
    figures = weight_sync_figures(machine={"cpus": 2, "python": "3.11.7", "load_average_1min": 1.0})  # before it
    found = checked(tmp_path, {"weight_sync.json": figures}, [WEIGHT_SYNC])
    assert found == [f"{tmp_path}/results/weight_sync.json: no machine record (rerun `{WEIGHT_SYNC.command}`)",
                     f"{tmp_path}/results.md: section '{WEIGHT_SYNC.title}' says 'not recorded'"]


def test_the_check_reports_keys_other_than_the_benchmark_writes_today(tmp_path):
    found = checked(tmp_path, {"weight_sync.json": weight_sync_figures(backend_version="1")}, [WEIGHT_SYNC])
    assert found == [f"{tmp_path}/results/weight_sync.json: keys differ from what benchmarks.weight_sync writes "
                     "today: unexpected backend_version"]
    assert ResultKeys(frozenset({"a", "b"}), frozenset({"c"})).mismatch(["a", "c", "d"]) == "missing b; unexpected d"


def test_the_check_reports_a_section_that_says_not_recorded(tmp_path):
    found = checked(tmp_path, {"weight_sync.json": weight_sync_figures()}, [WEIGHT_SYNC, PERF_ENVS])
    assert found == [f"{tmp_path}/results.md: section '{PERF_ENVS.title}' says 'not recorded'"]


def test_the_check_reports_a_stale_page_and_exits_1_with_a_line_per_problem(tmp_path, monkeypatch, capsys):
    assert checked(tmp_path, {"weight_sync.json": weight_sync_figures()}, [WEIGHT_SYNC]) == []
    monkeypatch.setattr(results_page, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(results_page, "PAGE", tmp_path / "results.md")
    monkeypatch.setattr(results_page, "BENCHMARKS", [WEIGHT_SYNC])
    monkeypatch.setattr(results_page, "QUOTING_PAGES", ())
    assert main(["--check"]) == 0
    (tmp_path / "results.md").write_text("typed by hand\n")
    (tmp_path / "results" / "weight_sync.json").write_text(json.dumps(weight_sync_figures(machine=None)))
    capsys.readouterr()
    assert main(["--check"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{tmp_path}/results/weight_sync.json: no machine record (rerun `{WEIGHT_SYNC.command}`)",
        f"{tmp_path}/results.md: section '{WEIGHT_SYNC.title}' says 'not recorded'",
        f"{tmp_path}/results.md: stale: run python -m benchmarks.results_page"]


def test_the_page_labels_each_section_with_its_machine_and_groups_them(tmp_path):
    here = weight_sync_figures()
    elsewhere = weight_sync_figures()
    elsewhere["machine"] = {**elsewhere["machine"], "cpu_model": "Another CPU", "units": ["avx2", "amx_tile"]}
    again, old = (dataclasses.replace(WEIGHT_SYNC, title=title, file=f"{title}.json") for title in ("Again", "Old"))
    files = {"weight_sync.json": here, "Again.json": elsewhere, "Old.json": weight_sync_figures(machine={"cpus": 2})}
    checked(tmp_path, files, [WEIGHT_SYNC, again, old])
    index, *sections = (tmp_path / "results.md").read_text().split("\n## ")
    assert [line for line in index.splitlines() if line.startswith("- ")] == [
        f"- **Machine 1**, {machine_described(here['machine'])}: {WEIGHT_SYNC.title}.",
        f"- **Machine 2**, {machine_described(elsewhere['machine'])}: Again.",
        "- Machine not recorded: Old."]
    by_title = {section.splitlines()[0]: section for section in sections}
    assert "**Machine 1**: " in by_title[WEIGHT_SYNC.title]
    assert "**Machine 2**: Another CPU (units: avx2, amx_tile)" in by_title["Again"]
    assert "Machine not recorded in this file" in by_title["Old"] and "Recorded with: cpus 2." in by_title["Old"]


def test_every_figure_the_docs_quote_is_in_a_results_file_or_dated():
    assert results_page.unbacked_figures() == []


def test_a_quoted_figure_needs_a_results_file_at_its_precision_or_a_date(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "bench.json").write_text(json.dumps({"speedup": 3.0871, "rows": [{"peak_gb": 5.796}],
                                                    "note": "quiet 1.95x"}))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text(
        "Ours is 3.09x TRL's and peaks at 5.80 GB; 1.95x quiet.\n"  # all three in the file at this precision
        "A hand edit: 3.1x? No: 3.10x is not 3.0871.\n"  # 3.1x matches, 3.10x does not
        "\n"
        "| run | speed-up |\n|---|---|\n| old | 7.5-8.2x |\n"  # a table, undated
        "\n"
        "Measured by hand on 2026-12-01 (`python -m bench`): 9.99x.\n"
        "\n"
        "```\nprint('12.5x in a code block is not a quoted figure')\n```\n"
        "Inline code is not either: `--speedup 4.4x`.\n")
    found = results_page.unbacked_figures([docs], results, tmp_path / "results.md")
    assert [line.split(" is in no")[0] for line in found] == [
        f"{docs / 'page.md'}:2: 3.10x", f"{docs / 'page.md'}:6: 7.5x", f"{docs / 'page.md'}:6: 8.2x"]
