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

:class:`Command` and :func:`require` live in :mod:`pettingllm_envs.commandline.commands`, the
ground floor every command line imports. The module that
holds the :class:`Command` is imported on every ``pettingllm`` start (for the ``--help``
listing), so it must be light; ``main`` and ``parser`` are ``module:function`` references
imported only when the command runs or its parser is asked for. ``pettingllm`` hands every
argument after the command name to ``main`` untouched, so the command parses its own options
(build its parser with :class:`pettingllm_envs.commandline.errors.ArgumentParser` for one-line
errors). A :class:`~pettingllm_envs.commandline.errors.UsageError` it raises is shown as one
line with exit status 2, like every other mistake.

A plug-in that cannot be loaded (its package is broken or not importable) stays listed as
unavailable, with the reason, and running it is a one-line error: the other commands work.
A plug-in named like a built-in command, or like one found earlier, is skipped with a
one-line warning on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from pettingllm_envs.commandline.commands import Command, call_command, load_reference
from pettingllm_envs.commandline.errors import UsageError

ENTRY_POINT_GROUP = "pettingllm.commands"


@dataclass(frozen=True)
class Plugin:
    """A discovered command: its entry point, and the :class:`Command` or why it could not be loaded."""

    name: str
    entry_point: EntryPoint
    command: Command | None
    error: str = ""


def _load(entry_point: EntryPoint) -> Plugin:
    try:
        command = entry_point.load()
    except Exception as error:  # a broken plug-in must not take the other commands down
        return Plugin(entry_point.name, entry_point, None, f"cannot load {entry_point.value} "
                      f"({type(error).__name__}: {' '.join(str(error).split())})")
    if not isinstance(command, Command):
        return Plugin(entry_point.name, entry_point, None,
                      f"{entry_point.value} is a {type(command).__name__}, not a {Command.__module__}.Command")
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
    return call_command(plugin.command, args.options)


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


__all__ = ["ENTRY_POINT_GROUP", "Plugin", "add_plugin_commands", "command_parser", "discover"]
