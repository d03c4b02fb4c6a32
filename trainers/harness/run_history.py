"""A run directory is the source of truth for its run: ``config.json`` holds the run's
configuration, ``history.jsonl`` one record per start of it.

``resume`` continues the run in ``run_dir`` as if it had never stopped, so:

* a run dir that holds no run (missing, or no ``config.json``) is refused: resuming there would
  silently start a fresh run;
* on the command line (:func:`trainers.algorithms.atgrpo.options.load_run_config`), the options
  left out take the run's saved values (:func:`saved_config`), not the defaults (a 40-step run
  resumed without ``--steps`` stops at 40, not 100);
* a value that contradicts the saved one is refused in one line naming each such option
  (``--env sudoku_v0`` on a plan_path_v0 run trained sudoku from plan_path's checkpoint);
  only the fields of :data:`MAY_CHANGE` may differ: they decide how long the run goes on and
  what it reports, not what it computes;
* every start appends a record (when, from which step, to which, what changed, what it chose
  from the machine) to ``history.jsonl``; ``config.json`` is written when the run starts and afterwards only to
  take in changes of :data:`MAY_CHANGE`, so it always describes the steps that ran.

The same rules hold for every trainer of the run harness (:mod:`trainers.harness.run_dir`): those
built on :class:`trainers.algorithms.atgrpo.train.Trainer` (``train``, ``train-variants``, ``train-ray``) and
M-GRPO (``train-mgrpo``), through :func:`check_resume`, :func:`record_start` and, for options
given on a command line, :func:`refuse_contradictions`. Each takes the run dir, the resume flag
and the run's config as JSON values (:func:`config_json`), never a config class, so any
algorithm's config serves.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trainers.harness.errors import ConfigError

CONFIG = "config.json"
HISTORY = "history.jsonl"
#: Fields a resumed run may change: how long it goes on, how often it checkpoints and
#: evaluates (the evaluation draws from its own random state), how it reports progress and
#: profiles its steps, and where its run dir is (a run dir may be moved; the run is the one found there); for
#: M-GRPO also how long a side waits for the other and where the two meet (each start
#: exchanges its records under a namespace of its own).
MAY_CHANGE = frozenset({"steps", "checkpoint_every", "keep_checkpoints", "eval_every", "progress", "tensorboard",
                        "profile", "run_dir", "timeout_s", "store"})
#: How a start treats the run dir, not part of the run's configuration.
START_FLAGS = frozenset({"resume", "overwrite"})


def config_json(config: Any) -> dict[str, Any]:
    """A config dataclass instance as JSON values, the form ``config.json`` holds (lists, not tuples)."""
    return dict(json.loads(json.dumps(dataclasses.asdict(config))))


def saved_config(run_dir: Path) -> dict[str, Any]:
    """The configuration the run in ``run_dir`` was started with (without :data:`START_FLAGS`);
    :class:`ConfigError` when ``run_dir`` holds no run to resume."""
    if not run_dir.is_dir():
        raise ConfigError(f"resume: run_dir {str(run_dir)!r} does not exist, so there is no run to resume "
                          "(leave out --resume to start a new run there)")
    path = run_dir / CONFIG
    if not path.is_file():
        raise ConfigError(f"resume: run_dir {str(run_dir)!r} holds no run to resume (it has no {CONFIG})")
    try:
        saved = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ConfigError(f"resume: {path} is not valid JSON ({error.msg})") from None
    if not isinstance(saved, dict):
        raise ConfigError(f"resume: {path} does not hold a config mapping")
    return {name: value for name, value in saved.items() if name not in START_FLAGS}


def contradictions(saved: dict[str, Any], now: dict[str, Any], names: Iterable[str]) -> dict[str, tuple[Any, Any]]:
    """``name -> (saved value, value now)`` for each field of ``names`` that the config ``now``
    (:func:`config_json`) sets to another value than the run's and that may not change on resume."""
    return {name: (saved[name], now[name]) for name in sorted(names)
            if name in saved and name in now and name not in MAY_CHANGE | START_FLAGS and saved[name] != now[name]}


def _refusal(run_dir: Path, clashes: dict[str, tuple[Any, Any]], option: bool) -> ConfigError:
    shown = ", ".join(f"{'--' + name.replace('_', '-') if option else name} {now!r} (the run's: {saved!r})"
                      for name, (saved, now) in clashes.items())
    return ConfigError(f"resume: {shown} contradict{'s' if len(clashes) == 1 else ''} the run in "
                       f"{str(run_dir)!r}; leave {'it' if len(clashes) == 1 else 'them'} out to continue the run "
                       "as it was started, or start a new run in another run_dir")


def check_resume(run_dir: Path, config: dict[str, Any], *, resume: bool) -> dict[str, tuple[Any, Any]]:
    """For a ``resume`` start: ``run_dir`` holds a run and ``config`` (:func:`config_json`) agrees
    with it in every field outside :data:`MAY_CHANGE` (else :class:`ConfigError`). Returns the
    changes of :data:`MAY_CHANGE` fields, ``name -> (saved, now)``; nothing for a new run."""
    if not resume:
        return {}
    saved = saved_config(run_dir)
    clashes = contradictions(saved, config, saved)
    if clashes:
        raise _refusal(run_dir, clashes, option=False)
    return {name: (saved[name], config[name]) for name in sorted(MAY_CHANGE)
            if name in saved and saved[name] != config[name]}


def record_start(run_dir: Path, config: dict[str, Any], *, resume: bool, step: int, to_step: int,
                 changed: dict[str, tuple[Any, Any]], chosen: dict[str, Any] | None = None) -> None:
    """Write ``config.json`` for a new run (``config``: :func:`config_json`), or take ``changed``
    into it on resume, and append this start (from ``step`` to ``to_step``) to ``history.jsonl``,
    with ``chosen``: what this start chose from the machine it runs on (e.g. the vLLM engine's
    dtype for ``vllm_dtype: auto``), which a resume on another machine may choose otherwise."""
    path = run_dir / CONFIG
    if not resume or changed or not path.is_file():
        if resume:
            written = {**json.loads(path.read_text()), **{name: now for name, (_, now) in changed.items()}}
        else:
            written = config
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(written, indent=2))
        os.replace(tmp, path)
    record = {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "resume": bool(resume), "from_step": step, "to_step": to_step,
              "changed": {name: {"from": saved, "to": now} for name, (saved, now) in changed.items()}}
    if chosen:
        record["chosen"] = chosen
    with open(run_dir / HISTORY, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def given_options(args: dict[str, Any]) -> dict[str, Any]:
    """The fields set on the command line (``args``: parsed options, ``config`` the ``--config``
    YAML file) or in that file; a file that does not read as a mapping gives none here (the
    config's loader reports it)."""
    given = {name: value for name, value in args.items() if name != "config"}
    if args.get("config"):
        import yaml

        try:
            loaded = yaml.safe_load(Path(args["config"]).read_text())
        except (OSError, yaml.YAMLError):
            loaded = None
        if isinstance(loaded, dict):
            given = {**loaded, **given}
    return given


def refuse_contradictions(run_dir: Path, saved: dict[str, Any], config: dict[str, Any], given: Iterable[str]) -> None:
    """For a resume from a command line: :class:`ConfigError` naming, as options, each field of
    ``given`` (:func:`given_options`) in which ``config`` (:func:`config_json`) contradicts the run's
    ``saved`` config (:func:`saved_config`)."""
    clashes = contradictions(saved, config, given)
    if clashes:
        raise _refusal(run_dir, clashes, option=True)


__all__ = ["CONFIG", "HISTORY", "MAY_CHANGE", "check_resume", "config_json", "contradictions", "given_options",
           "record_start", "refuse_contradictions", "saved_config"]
