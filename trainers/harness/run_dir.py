"""The run harness every trainer shares: the run dir, checkpoints, resume, logs, evaluation schedule.

A run lives in one directory. What this module guarantees, for AT-GRPO's
:class:`~trainers.algorithms.atgrpo.train.Trainer` (and the trainers built on it) and for M-GRPO alike:

* **No run is overwritten by accident** (:func:`check_run_dir`): a run dir that holds files
  needs ``resume`` (continue it) or ``overwrite`` (delete it, :func:`start_logs`).
* **The run dir is the run's source of truth**: ``config.json`` and ``history.jsonl``
  (:mod:`trainers.harness.run_history`: ``--resume`` restores the saved config and refuses options
  that contradict it).
* **Checkpoints are atomic** (:class:`Checkpoints`): a checkpoint is written into a temporary
  directory, fsynced, renamed into place, and only then pointed to by ``latest``; a crash at
  any moment leaves the previous checkpoint intact and pointed to. The newest ``keep`` stay.
* **Resume continues exactly**: a checkpoint holds the policies, their optimiser states,
  every global RNG state (python, numpy, torch) and the step (:func:`save_training_state`,
  :func:`restore_training_state`); the logs lose the lines written after it
  (:func:`start_logs`), so ``metrics.jsonl`` reads as if the run had never stopped. Logs
  are appended to, never rewritten on a start.
* **Held-out evaluation** runs on a schedule (:func:`evaluation_due`); **an interrupted run
  says** which step its last checkpoint holds and how to continue (:func:`interruption_note`).

Each component takes the values it needs, not a trainer's whole config.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import torch

from trainers.harness.errors import ConfigError
from trainers.maths.seeding import rng_state, set_rng_state

METRICS = "metrics.jsonl"
CHECKPOINTS = "checkpoints"
#: A checkpoint's JSON state: at least ``step``; each trainer adds what it needs to continue.
STATE = "state.json"
LATEST = "latest"


# ------------------------------------------------------------------ the run dir
def check_run_dir(run_dir: Path, *, resume: bool, overwrite: bool, dump_samples: str | None = None,
                  ignore: Collection[str] = ()) -> None:
    """Refuse to start a new run over an earlier one: a ``run_dir`` that holds files (other than
    ``ignore``), or a ``dump_samples`` file that exists, needs ``resume`` (continue it) or
    ``overwrite`` (replace it). Otherwise a second run would delete the first one's metrics and
    samples but keep its checkpoints and plots, which would then not match them."""
    if resume and overwrite:
        raise ConfigError("resume and overwrite contradict each other: --resume continues the run in run_dir, "
                          "--overwrite deletes it")
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"run_dir {str(run_dir)!r} is a file, not a directory")
    if resume or overwrite:
        return
    held = sorted(p.name for p in run_dir.iterdir() if p.name not in ignore) if run_dir.is_dir() else []
    if held:
        shown = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
        raise ConfigError(f"run_dir {str(run_dir)!r} already holds a run ({shown}): pass --resume to continue it, "
                          "--overwrite to delete it and start again, or choose another --run-dir")
    if dump_samples and Path(dump_samples).exists():
        raise ConfigError(f"dump_samples {dump_samples!r} already exists: pass --overwrite to replace it "
                          "or choose another file")


def clear_run(run_dir: Path, dump_samples: str | None = None, keep: Collection[str] = ()) -> None:
    """Delete everything an earlier run left in ``run_dir`` (except ``keep``) and its samples file."""
    if run_dir.is_dir():
        for entry in run_dir.iterdir():
            if entry.name in keep:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    if dump_samples:
        Path(dump_samples).unlink(missing_ok=True)


def truncate_jsonl(path: Path, last_step: int) -> None:
    """Drop lines logged after ``last_step`` (a crash after the last checkpoint), atomically."""
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines(keepends=True)
            if line.strip() and json.loads(line)["step"] <= last_step]
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(kept))
    os.replace(tmp, path)


def start_logs(run_dir: Path, logs: Sequence[Path], *, resume: bool, overwrite: bool, step: int,
               keep: Collection[str] = ()) -> None:
    """Bring the run's logs (``metrics.jsonl``, a samples file: JSON lines with a ``step``) in
    line with the step the run starts from: on ``resume`` the lines logged after ``step`` (the
    checkpoint's, 0 without one) go; with ``overwrite`` the whole earlier run goes (``keep``
    aside). Called once setup has succeeded, so a failed start leaves the run as it was."""
    if resume:
        for log in logs:
            truncate_jsonl(log, step)
    elif overwrite:
        clear_run(run_dir, keep=keep)
        for log in logs:
            log.unlink(missing_ok=True)


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line to ``path`` (created with its folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


# ----------------------------------------------------------------- checkpoints
def _fsync_tree(root: Path) -> None:
    """Flush every file under ``root`` and the directories themselves to disk."""
    for folder, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as f:
                os.fsync(f.fileno())
        _fsync_dir(Path(folder))


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Checkpoints:
    """The checkpoints under ``root`` (``step_000007/`` ...), the ``latest`` pointer, the newest
    ``keep`` kept (see the module docstring)."""

    def __init__(self, root: Path, keep: int) -> None:
        self.root, self.keep = root, keep

    def latest(self) -> Path | None:
        pointer = self.root / LATEST
        if not pointer.exists():
            return None
        return self.root / pointer.read_text().strip()

    def at(self, step: int) -> Path | None:
        """The checkpoint of ``step``, if kept."""
        path = self.root / f"step_{step:06d}"
        return path if (path / STATE).is_file() else None

    def steps(self) -> list[int]:
        """The steps of the checkpoints kept, ascending."""
        if not self.root.is_dir():
            return []
        return sorted(int(p.name.removeprefix("step_")) for p in self.root.iterdir()
                      if p.is_dir() and p.name.startswith("step_") and (p / STATE).is_file())

    def save(self, step: int, write: Callable[[Path], None]) -> Path:
        """``write(folder)`` fills a temporary folder that becomes ``step_<step>`` (see the
        module docstring for the order that makes it atomic); returns the checkpoint."""
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.root / f"step_{step:06d}"
        tmp = self.root / f".tmp_step_{step:06d}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        write(tmp)
        _fsync_tree(tmp)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        pointer_tmp = self.root / f"{LATEST}.tmp"
        with open(pointer_tmp, "w") as f:
            f.write(final.name)
            f.flush()
            os.fsync(f.fileno())
        os.replace(pointer_tmp, self.root / LATEST)
        _fsync_dir(self.root)
        kept = sorted(p for p in self.root.iterdir() if p.is_dir() and p.name.startswith("step_"))
        for old in kept[:-self.keep]:
            shutil.rmtree(old)
        return final


def read_state(checkpoint: Path) -> dict[str, Any]:
    """A checkpoint's :data:`STATE`."""
    return dict(json.loads((checkpoint / STATE).read_text()))


def save_training_state(folder: Path, policy_sets: Sequence[Any], state: dict[str, Any]) -> None:
    """Write what continues a run exactly into ``folder``: every policy of ``policy_sets``
    (:class:`~trainers.models.policy_set.PolicySet` or alike: ``save``, ``optimizer_state``) under
    ``policies/<name>/``, their optimiser states, every global RNG state and ``state``
    (with the step)."""
    optimizers: dict[str, Any] = {}
    for policies in policy_sets:
        policies.save(folder / "policies")
        optimizers.update(policies.optimizer_state())
    torch.save(optimizers, folder / "optimizer.pt")
    torch.save(rng_state(), folder / "rng.pt")
    (folder / STATE).write_text(json.dumps(state, indent=2))


def restore_training_state(checkpoint: Path, policy_sets: Sequence[Any]) -> dict[str, Any]:
    """Put back the optimiser states and the RNG states :func:`save_training_state` wrote (the
    weights are loaded when the policies are built, from ``checkpoint / "policies"``); returns
    the checkpoint's state. Call it last in a run's setup: anything drawing random numbers
    after it would shift the streams."""
    optimizers = load_checkpoint_file(checkpoint / "optimizer.pt")
    for policies in policy_sets:
        policies.load_optimizer_state(optimizers)
    set_rng_state(load_checkpoint_file(checkpoint / "rng.pt"))
    return read_state(checkpoint)


def _numpy_array_globals() -> list[Any]:
    """What numpy's RNG state (a ``uint32`` array) pickles through: its array reconstructor,
    ``ndarray`` and ``dtype`` with the dtype's class, under numpy 1's and 2's module names."""
    import numpy as np

    core = getattr(np, "_core", None) or np.core
    return [core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))]


def load_checkpoint_file(path: Path) -> Any:
    """Load a checkpoint file with ``torch.load(weights_only=True)``: tensors, plain containers and
    numpy arrays only. A run dir may come from anyone (a shared run, a download), and a full
    unpickler would run whatever code a crafted file names; such a file is refused with one line."""
    import pickle

    try:
        with torch.serialization.safe_globals(_numpy_array_globals()):
            return torch.load(path, weights_only=True)
    except pickle.UnpicklingError as error:
        # torch's message is a page of advice; the line that names the refused object is the one to keep
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(error))
        named = f" (it names {found.group(1)})" if found else ""
        raise ConfigError(f"checkpoint file {path} holds objects other than tensors, numbers and arrays{named}, so it "
                          "was not written by this trainer and is not loaded") from None


def checkpoint_due(step: int, *, every: int, last: int) -> bool:
    """After step ``step`` (1-based): every ``every`` steps (0: never) and after the last one."""
    return (every > 0 and step % every == 0) or step == last


# ------------------------------------------------------------ evaluation, notes
def evaluation_due(step: int, *, every: int, last: int) -> bool:
    """After step ``step`` (1-based): every ``every`` steps and after the last one; never for 0."""
    return every > 0 and (step % every == 0 or step == last)


def interruption_note(checkpoint: Path | None, *, step: int, steps: int, run_dir: Path, command: str) -> str:
    """What an interrupted run kept and how to continue it: the step its last checkpoint holds
    (the steps after it are run again on resume) and the command that resumes it; ``step``:
    the steps finished when it stopped."""
    if checkpoint is None:
        kept = "no checkpoint was written yet, so a resumed run starts at step 0"
    else:
        kept = f"the last checkpoint holds step {read_state(checkpoint)['step']} ({checkpoint})"
    return (f"interrupted in step {step + 1} of {steps}; {kept}; continue with: "
            f"pettingllm {command} --run-dir {run_dir} --resume")


class Progress:
    """A tqdm bar on stderr when ``enabled`` (notes then print above it), else plain notes."""

    def __init__(self, enabled: bool, *, total: int, initial: int, desc: str) -> None:
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=desc, file=sys.stderr)

    def note(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr)

    def advance(self, **postfix: str) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(**postfix)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


__all__ = ["CHECKPOINTS", "METRICS", "STATE", "Checkpoints", "Progress", "append_jsonl", "check_run_dir",
           "checkpoint_due", "clear_run", "evaluation_due", "interruption_note", "load_checkpoint_file",
           "read_state", "restore_training_state", "save_training_state", "start_logs", "truncate_jsonl"]
