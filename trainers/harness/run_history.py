"""A run directory is the source of truth for its run: ``config.json`` holds the run's
configuration, ``history.jsonl`` one record per start of it.

``resume`` continues the run in ``run_dir`` as if it had never stopped, so:

* a run dir that holds no run (missing, or no ``config.json``) is refused: resuming there would
  silently start a fresh run;
* on the command line (:func:`trainers.algorithms.atgrpo.options.load_run_config`), the options
  left out take the run's saved values (:func:`saved_settings`), not the defaults (a 40-step run
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
given on a command line, :func:`refuse_contradictions`. They take any algorithm's config tree
(:class:`~trainers.harness.config_tree.ConfigTree`) and compare settings by name
(:func:`saved_settings`), so a run dir whose flat ``config.json`` predates the sections resumes too.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trainers.harness.config_tree import ConfigTree, config_json, flat_json
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


def saved_config(run_dir: Path) -> dict[str, Any]:
    """The configuration the run in ``run_dir`` was started with, as ``config.json`` holds it
    (by section, or flat as runs saved before the config tree); :class:`ConfigError` when
    ``run_dir`` holds no run to resume."""
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
    return saved


def saved_settings(run_dir: Path, cls: type[ConfigTree]) -> dict[str, Any]:
    """Every setting of the run in ``run_dir`` by name (:func:`~trainers.harness.config_tree.flat_json`
    of its ``config.json`` read as a ``cls``; settings the class no longer has are dropped, ones
    it has since gained take their defaults), without :data:`START_FLAGS`."""
    saved = cls().with_values(saved_config(run_dir), source=str(run_dir / CONFIG), ignore_unknown=True)
    return {name: value for name, value in flat_json(saved).items() if name not in START_FLAGS}


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


def check_resume(run_dir: Path, config: ConfigTree, *, resume: bool) -> dict[str, tuple[Any, Any]]:
    """For a ``resume`` start: ``run_dir`` holds a run and ``config`` agrees with it in every
    setting outside :data:`MAY_CHANGE` (else :class:`ConfigError`). Returns the changes of
    :data:`MAY_CHANGE` settings, ``name -> (saved, now)``; nothing for a new run."""
    if not resume:
        return {}
    saved, now = saved_settings(run_dir, type(config)), flat_json(config)
    clashes = contradictions(saved, now, saved)
    if clashes:
        raise _refusal(run_dir, clashes, option=False)
    return {name: (saved[name], now[name]) for name in sorted(MAY_CHANGE)
            if name in saved and saved[name] != now[name]}


def record_start(run_dir: Path, config: ConfigTree, *, resume: bool, step: int, to_step: int,
                 changed: dict[str, tuple[Any, Any]], chosen: dict[str, Any] | None = None) -> None:
    """Write ``config.json`` (by section: :func:`~trainers.harness.config_tree.config_json`) for a
    new run, or on a resume that ``changed`` settings (then ``config`` is the run's config with
    those changes), and append this start (from ``step`` to ``to_step``) to ``history.jsonl``,
    with ``chosen``: what this start chose from the machine it runs on (e.g. the vLLM engine's
    dtype for ``vllm_dtype: auto``), which a resume on another machine may choose otherwise."""
    path = run_dir / CONFIG
    if not resume or changed or not path.is_file():
        tmp = path.with_suffix(".json.tmp")
        # the start flags say how this start treated the run dir (history.jsonl has them), not what the run is
        tmp.write_text(json.dumps(config_json(config.replace(**dict.fromkeys(START_FLAGS, False))), indent=2))
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
    """For a resume from a command line: :class:`ConfigError` naming, as options, each setting of
    ``given`` (:func:`given_options`) in which ``config`` (:func:`~trainers.harness.config_tree.flat_json`)
    contradicts the run's ``saved`` settings (:func:`saved_settings`)."""
    clashes = contradictions(saved, config, given)
    if clashes:
        raise _refusal(run_dir, clashes, option=True)


__all__ = ["CONFIG", "HISTORY", "MAY_CHANGE", "check_resume", "contradictions", "given_options",
           "record_start", "refuse_contradictions", "saved_config", "saved_settings"]
