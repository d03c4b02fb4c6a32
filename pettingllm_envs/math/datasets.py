"""Loaders for standard math datasets from a user's local files (no network).

Supported record shapes (the format is detected per record when ``fmt="auto"``):

=================  ==========================================  ============================
format             fields                                      gold answer
=================  ==========================================  ============================
``gsm8k``          ``question``, ``answer``                    text after ``####``
``math``           ``problem``, ``solution`` (``level``)       last ``\\boxed{}`` of solution
                                                               (or an ``answer`` field)
``answer``         ``problem``/``question``/``Question`` and   that field; a list (as in
(AIME, Olympiad-   ``answer``/``Answer``/``final_answer``      OlympiadBench) is joined
Bench, ...)                                                    with ``, ``
=================  ==========================================  ============================

Files are JSONL, JSON (a list of records) or parquet (needs ``pyarrow``, imported
lazily). :func:`load_hf_dataset` reads a dataset that the Hugging Face ``datasets``
library already has in its local cache; it forces offline mode so it never downloads.
"""

from __future__ import annotations

import hashlib
import json
import os
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pettingllm_envs.math.verify import extract_boxed

Format = Literal["auto", "gsm8k", "math", "answer"]
FORMATS: tuple[str, ...] = typing.get_args(Format)
QUESTION_KEYS = ("problem", "question", "Question", "Problem")
ANSWER_KEYS = ("answer", "Answer", "final_answer", "expected_answer")


@dataclass(frozen=True)
class MathProblem:
    """One math problem: the text shown to the agents and the gold final answer."""

    question: str
    answer: str
    source: str = "procedural"
    level: int | None = None

    @property
    def uid(self) -> str:
        """A content hash: the same problem has the same id in every process and split."""
        return hashlib.sha256(f"{self.source}\n{self.question}".encode()).hexdigest()[:16]


class DatasetFormatError(ValueError):
    """A record or file that none of the supported formats can read."""


def gsm8k_answer(solution: str) -> str:
    """The final answer of a GSM8K solution: the text after the last ``####``, commas removed."""
    if "####" not in solution:
        raise DatasetFormatError("a GSM8K answer must contain '#### <final answer>'")
    return solution.rsplit("####", 1)[1].strip().replace(",", "")


def record_to_problem(record: Mapping[str, Any], fmt: Format = "auto", source: str = "dataset") -> MathProblem:
    """Convert one dataset record to a :class:`MathProblem` (see the module table)."""
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    question = next((record[k] for k in QUESTION_KEYS if isinstance(record.get(k), str)), None)
    if question is None:
        raise DatasetFormatError(f"no question field (one of {QUESTION_KEYS}) in record keys {sorted(record)}")
    if fmt == "auto":
        answer = record.get("answer")
        if isinstance(answer, str) and "####" in answer:
            fmt = "gsm8k"
        elif isinstance(record.get("solution"), str) and answer is None:
            fmt = "math"
        else:
            fmt = "answer"
    level = _level(record.get("level"))
    if fmt == "gsm8k":
        return MathProblem(question, gsm8k_answer(str(record.get("answer", ""))), source, level)
    if fmt == "math":
        gold = record.get("answer")
        if not isinstance(gold, str) or not gold.strip():
            gold = extract_boxed(str(record.get("solution", "")))
        if not gold:
            raise DatasetFormatError("a MATH record needs a \\boxed{} answer in its solution (or an answer field)")
        return MathProblem(question, gold, source, level)
    value = next((record[k] for k in ANSWER_KEYS if record.get(k) not in (None, "", [])), None)
    if value is None:
        raise DatasetFormatError(f"no answer field (one of {ANSWER_KEYS}) in record keys {sorted(record)}")
    if isinstance(value, (list, tuple)):
        value = ", ".join(str(v).strip().strip("$") for v in value)
    return MathProblem(question, str(value).strip(), source, level)


def _level(value: Any) -> int | None:
    """``3``, ``"3"`` or MATH's ``"Level 3"`` -> 3; anything else -> None."""
    text = str(value).removeprefix("Level").strip() if value is not None else ""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 3 else None  # int("³") raises


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a ``.jsonl``, ``.json`` or ``.parquet`` file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"dataset file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as error:
            raise ImportError(
                f"reading {path} needs pyarrow: pip install pyarrow (or convert the file to JSONL)"
            ) from error
        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    if suffix == ".json":
        data = json.loads(text)
        if not isinstance(data, list):
            raise DatasetFormatError(f"{path} must hold a JSON list of records")
        return data
    if suffix == ".jsonl":
        records = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise DatasetFormatError(f"{path}:{number}: not valid JSON ({error.msg})") from error
        return records
    raise DatasetFormatError(f"unsupported dataset file type {suffix!r}: use .jsonl, .json or .parquet")


def problems_from_records(records: Iterable[Mapping[str, Any]], fmt: Format = "auto",
                          source: str = "dataset") -> tuple[MathProblem, ...]:
    """Convert records; duplicates (same question) are kept once so that splits stay disjoint."""
    seen: dict[str, MathProblem] = {}
    for number, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise DatasetFormatError(f"record {number} is a {type(record).__name__}, not an object")
        try:
            problem = record_to_problem(record, fmt, source)
        except DatasetFormatError as error:
            raise DatasetFormatError(f"record {number}: {error}") from error
        seen.setdefault(problem.uid, problem)
    if not seen:
        raise DatasetFormatError("the dataset has no records")
    return tuple(seen.values())


def load_dataset_file(path: str | os.PathLike[str], fmt: Format = "auto") -> tuple[MathProblem, ...]:
    """All problems of a local GSM8K / MATH / AIME-style file."""
    return problems_from_records(read_records(path), fmt, source=Path(path).stem)


def load_hf_dataset(name: str, split: str = "test", config: str | None = None,
                    fmt: Format = "auto") -> tuple[MathProblem, ...]:
    """Problems of a Hugging Face dataset already in the local cache (never downloads)."""
    os.environ["HF_DATASETS_OFFLINE"] = "1"  # read before datasets is imported: cache only
    try:
        import datasets
    except ImportError as error:
        raise ImportError(
            "load_hf_dataset needs the `datasets` library (pip install datasets) and the dataset in its "
            "local cache; or export the records to a JSONL/parquet file and use load_dataset_file"
        ) from error
    records = datasets.load_dataset(name, config, split=split)
    return problems_from_records(records, fmt, source=f"{name}:{split}")
