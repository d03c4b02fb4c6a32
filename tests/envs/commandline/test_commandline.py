"""The pieces every command line is built from (pettingllm_envs/commandline): options from a config
dataclass, and a plug-in command run as ``pettingllm`` runs it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from pettingllm_envs.commandline.commands import Command, call_command
from pettingllm_envs.commandline.errors import ArgumentParser, UsageError
from pettingllm_envs.commandline.options import add_field_options, dataclass_field_docs


@dataclass
class Base:
    rate: float = 0.5
    """How fast."""
    mode: Literal["a", "b"] = "a"
    """Which way."""


@dataclass
class Derived(Base):
    rate: float = 0.1
    """How fast, slower here."""
    verbose: bool = False
    """Say more."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else."""


def parse(argv: list[str], cls: type = Derived, prefix: str = "") -> dict[str, Any]:
    parser = ArgumentParser(prog="test")
    add_field_options(parser, cls, dest_prefix=prefix)
    return vars(parser.parse_args(argv))


def test_options_are_text_and_only_the_given_ones_are_parsed():
    # the config's own checks coerce the text, so YAML and the command line share one set of rules
    assert parse([]) == {}
    assert parse(["--rate", "1e-3", "--mode", "b"]) == {"rate": "1e-3", "mode": "b"}
    assert parse(["--verbose"]) == {"verbose": True}
    assert parse(["--verbose", "no"]) == {"verbose": "no"}
    assert parse(["--extra", "{k: 1}"], prefix="layout.") == {"layout.extra": "{k: 1}"}


def test_help_shows_the_nearest_docstring_the_default_and_the_choices():
    parser = ArgumentParser(prog="test")
    add_field_options(parser, Derived)
    text = " ".join(parser.format_help().split())
    assert "--rate RATE How fast, slower here. (default: 0.1)" in text
    assert "--mode {a,b} Which way. (default: 'a')" in text
    assert "--extra EXTRA Anything else. (default: {})" in text
    assert dataclass_field_docs(Derived)["mode"] == "Which way."


def test_a_field_without_a_docstring_is_refused():
    @dataclass
    class Undocumented:
        size: int = 1

    with pytest.raises(ValueError, match=r"Undocumented.size has no docstring"):
        add_field_options(argparse.ArgumentParser(), Undocumented)


class BadValue(Exception):
    """A user's mistake as a command of another package reports it."""


def fails(argv: list[str]) -> int:
    raise BadValue(f"bad value {argv[0]!r}")


def echo(argv: list[str]) -> int:
    return len(argv)


def test_a_command_runs_with_its_user_errors_as_one_line_usage_errors():
    here = __name__
    assert call_command(Command(summary="echo", main=f"{here}:echo"), ["a", "b"]) == 2
    declared = Command(summary="fails", main=f"{here}:fails", user_errors=(f"{here}:BadValue",))
    with pytest.raises(UsageError, match="bad value 'x'"):
        call_command(declared, ["x"])
    with pytest.raises(BadValue):  # an exception the command does not declare is a bug: its traceback shows
        call_command(Command(summary="fails", main=f"{here}:fails"), ["x"])


def test_a_command_whose_library_is_missing_names_where_it_comes_from():
    command = Command(summary="needs", main=f"{__name__}:echo", needs=("no_such_library_here",),
                      needs_hint="the train extra")
    with pytest.raises(UsageError, match="needs no_such_library_here, which comes with the train extra"):
        call_command(command, [])
