"""The declaration of a ``pettingllm`` command that another package adds: :class:`Command`.

A distribution names each of its commands in the entry-point group ``pettingllm.commands``,
pointing at a :class:`Command` (``pettingllm_envs.cli.plugins`` discovers them)::

    [project.entry-points."pettingllm.commands"]
    hello = "hello_plugin:HELLO"          # HELLO = Command(summary=..., main="hello_plugin:main")

The module holding the :class:`Command` is imported on every ``pettingllm`` start (for the
``--help`` listing), so it must be light: ``main`` and ``parser`` are ``module:function``
references, imported only when the command runs or its parser is asked for.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pettingllm_envs.commandline.errors import UsageError


@dataclass(frozen=True)
class Command:
    """A ``pettingllm`` command declared by another package (see :mod:`pettingllm_envs.cli.plugins`)."""

    summary: str
    """One line for ``pettingllm --help``."""
    main: str
    """``module:function`` of ``main(argv: list[str]) -> int``: parses the arguments after the
    command name and runs the command."""
    parser: str | None = None
    """``module:function`` of ``build_parser(prog: str) -> argparse.ArgumentParser``, the parser
    ``main`` uses (for tests and tools that inspect every command's options)."""
    needs: tuple[str, ...] = ()
    """Modules imported before ``main``: a missing one is a one-line error naming ``needs_hint``."""
    needs_hint: str = ""
    """Where ``needs`` come from, e.g. ``the train extra: pip install -e '.[train]' ...``
    (:func:`pettingllm_envs.extras.extra_hint` words it)."""
    loads_models: bool = False
    """Silence Hugging Face's progress bars and warnings before running (commands that load models)."""
    user_errors: tuple[str, ...] = ()
    """``module:class`` of exceptions that report a mistake of the user (a bad config value): shown
    as one line with exit status 2, like :class:`~pettingllm_envs.commandline.errors.UsageError`."""



def require(modules: Iterable[str], hint: str = "") -> None:
    """Import ``modules``; one that is not installed is a one-line usage error naming ``hint``
    (where it comes from) when there is one."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            where = f"which comes with {hint}" if hint else "which is not installed"
            raise UsageError(f"this command needs {module}, {where}") from error


def load_reference(reference: str) -> Any:
    """The object a ``module:attribute`` reference names (dots in the attribute walk into it)."""
    module, _, attribute = reference.partition(":")
    value: Any = importlib.import_module(module)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


def call_command(command: Command, argv: Sequence[str]) -> int:
    """Run ``command``'s ``main`` on ``argv`` as ``pettingllm`` does: model libraries quieted when
    it loads models, its ``needs`` imported first (a missing one is a one-line error naming where
    it comes from), and an exception of its ``user_errors`` raised again as :class:`UsageError`."""
    if command.loads_models:
        quiet_model_libraries()
    require(command.needs, command.needs_hint)
    main = load_reference(command.main)  # imports the command's module, and with it its error classes
    user_errors = tuple(load_reference(reference) for reference in command.user_errors)
    try:
        return int(main(list(argv)) or 0)
    except user_errors as error:
        raise UsageError(str(error)) from error


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


__all__ = ["Command", "call_command", "load_reference", "quiet_model_libraries", "require"]
