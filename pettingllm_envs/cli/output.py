"""Terminal output of the command line: aligned tables with a legend, and quiet model libraries."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]], legend: str = "") -> str:
    """A plain-text table with aligned columns, and an optional legend line under it."""
    cells = [list(map(str, header)), *[list(map(str, row)) for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if legend:
        lines.append(legend)
    return "\n".join(lines)


def quiet_model_libraries() -> None:
    """Silence Hugging Face's per-file progress bars ("Loading weights", "Writing model shards"),
    its info/warning logging and library FutureWarnings, for the commands that load models.

    Called by the command line only (a library import never changes global logging): the
    environment variables reach transformers and huggingface_hub when they are first
    imported, and the calls below cover them when they already are.
    """
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    for category in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category)
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # the env-only install: nothing to silence
        return
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
