"""Commands from other packages: ``pettingllm`` discovers them through the entry-point group
``pettingllm.commands``.

The env package knows no command outside its own (``list``, ``run``, ``play``, ``bench``): the
trainer's commands (``train``, ``plot``, ...) and any third-party command are entry points
that their distribution declares, each named like the command and pointing at a
:class:`Command`::

    [project.entry-points."pettingllm.commands"]
    hello = "hello_plugin:HELLO"          # HELLO = Command(summary=..., main="hello_plugin:main")

Adding a command is that one line plus the :class:`Command`; after editing the entry points
of an installed (also an editable) distribution, reinstall it (``pip install -e . --no-deps``)
so that its metadata is regenerated.

The module that holds the :class:`Command` is imported on every ``pettingllm`` start (for the
``--help`` listing), so it must be light; ``main`` and ``parser`` are ``module:function``
references imported only when the command runs or its parser is asked for. ``pettingllm``
hands every argument after the command name to ``main`` untouched, so the command parses
its own options (build its parser with :class:`pettingllm_envs.cli.errors.ArgumentParser`
for one-line errors). A :class:`~pettingllm_envs.cli.errors.UsageError` it raises is shown
as one line with exit status 2, like every other mistake.

A plug-in that cannot be loaded (its package is broken or not importable) stays listed as
unavailable, with the reason, and running it is a one-line error: the other commands work.
A plug-in named like a built-in command, or like one found earlier, is skipped with a
one-line warning on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from pettingllm_envs.cli.errors import UsageError
from pettingllm_envs.cli.output import quiet_model_libraries

ENTRY_POINT_GROUP = "pettingllm.commands"


@dataclass(frozen=True)
class Command:
    """A ``pettingllm`` command declared by another package (see the module docstring)."""

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
    as one line with exit status 2, like :class:`~pettingllm_envs.cli.errors.UsageError`."""


@dataclass(frozen=True)
class Plugin:
    """A discovered command: its entry point, and the :class:`Command` or why it could not be loaded."""

    name: str
    entry_point: EntryPoint
    command: Command | None
    error: str = ""


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


def _load(entry_point: EntryPoint) -> Plugin:
    try:
        command = entry_point.load()
    except Exception as error:  # a broken plug-in must not take the other commands down
        return Plugin(entry_point.name, entry_point, None, f"cannot load {entry_point.value} "
                      f"({type(error).__name__}: {' '.join(str(error).split())})")
    if not isinstance(command, Command):
        return Plugin(entry_point.name, entry_point, None,
                      f"{entry_point.value} is a {type(command).__name__}, not a {__name__}.Command")
    return Plugin(entry_point.name, entry_point, command)


def discover(reserved: Iterable[str] = ()) -> list[Plugin]:
    """Every command of the ``pettingllm.commands`` group, sorted by name; names in ``reserved``
    (the built-in commands) and repeated names are skipped with a warning."""
    taken, plugins = set(reserved), []
    for entry_point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name):
        if entry_point.name in taken:
            print(f"pettingllm: warning: command {entry_point.name!r} of {entry_point.value} is skipped: "
                  "another command has that name", file=sys.stderr)
            continue
        taken.add(entry_point.name)
        plugins.append(_load(entry_point))
    return plugins


def find_plugin(name: str) -> Plugin:
    """The discovered command ``name`` (KeyError when there is none)."""
    for plugin in discover():
        if plugin.name == name:
            return plugin
    raise KeyError(name)


def command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of plug-in command ``name`` (imports its module)."""
    command = find_plugin(name).command
    if command is None or command.parser is None:
        raise ValueError(f"command {name!r} declares no parser")
    builder: Callable[..., argparse.ArgumentParser] = load_reference(command.parser)
    return builder(prog=f"pettingllm {name}")


def _run(plugin: Plugin, args: argparse.Namespace) -> int:
    if plugin.command is None:
        raise UsageError(f"command {plugin.name!r} is unavailable: {plugin.error}")
    command = plugin.command
    if command.loads_models:
        quiet_model_libraries()
    require(command.needs, command.needs_hint)
    main = load_reference(command.main)  # imports the command's module, and with it its error classes
    user_errors = tuple(load_reference(reference) for reference in command.user_errors)
    try:
        return int(main(args.options) or 0)
    except user_errors as error:
        raise UsageError(str(error)) from error


def add_plugin_commands(sub: Any, reserved: Iterable[str]) -> None:
    """Add every discovered command to the ``pettingllm`` subparsers ``sub``."""
    for plugin in discover(reserved):
        summary = plugin.command.summary if plugin.command else f"(unavailable: {plugin.error})"
        # Every argument goes to the command's own main; prefix_chars="+" keeps this parser
        # from reading "--x" options (--help included) itself.
        p = sub.add_parser(plugin.name, help=summary, add_help=False, prefix_chars="+")
        p.add_argument("options", nargs=argparse.REMAINDER,
                       help=f"options of the command, see pettingllm {plugin.name} --help")
        p.set_defaults(func=partial(_run, plugin))


__all__ = ["ENTRY_POINT_GROUP", "Command", "Plugin", "add_plugin_commands", "command_parser", "discover",
           "load_reference", "require"]
