"""Where the benchmarks put their figures: one JSON file each under ``benchmarks/results/``, which
``python -m benchmarks.results_page`` renders into docs/results.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_results(out: Path, results: dict[str, Any]) -> None:
    """Write ``results`` to ``out`` as indented JSON (a diff of two runs then reads line by line)
    and say where, so a log shows which file a run replaced."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")
