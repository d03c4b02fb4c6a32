"""User errors of the command line: one clear line, exit status 2, no traceback.

Validation code anywhere in a command raises :class:`UsageError` with a message that says
what was wrong, what is allowed and, where one exists, the closest allowed value
(:func:`did_you_mean`). ``pettingllm``'s ``main`` catches it once, prints
``pettingllm: error: <message>`` and returns 2; ``--debug`` re-raises it with its traceback.

:class:`ArgumentParser` makes argparse follow the same rule: its errors raise
:class:`UsageError` instead of printing the usage block, invalid choices and unknown
options come with a close match, every option's help shows its default, and help text
written for Sphinx (double backticks, ``:class:`` roles) is shown as plain text.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterable
from typing import Any, NoReturn


class UsageError(Exception):
    """A mistake in what the user asked for (not a bug): shown as one line, exit status 2."""


def did_you_mean(word: str, allowed: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest allowed value, or ``""`` when none is close."""
    close = difflib.get_close_matches(str(word), [str(a) for a in allowed], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


_ROLE = re.compile(r":[a-z]+:`(~?)([^`]+)`")
_LITERAL = re.compile(r"(?<!`)``([^`]+)``(?!`)")  # not a code fence (```)


def terminal_text(text: str) -> str:
    """Sphinx markup as plain text: ``:class:`~a.b.C``` -> `C`, ``:mod:`a.b``` -> `a.b`,
    double backticks -> single."""
    text = _ROLE.sub(lambda m: "`" + (m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2)) + "`", text)
    return _LITERAL.sub(r"`\1`", text)


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to every option whose help does not already say its default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (action.option_strings and "default:" not in text.lower() and action.default is not argparse.SUPPRESS
                and not isinstance(action, argparse._HelpAction)):
            if action.default is None:
                shown = "none"
            elif action.default == "":
                shown = "''"
            else:
                shown = "%(default)s"  # argparse fills it in
            text = f"{text} (default: {shown})".lstrip()
        return text


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors (:class:`UsageError`), close matches and plain-text help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")

    def format_help(self) -> str:
        return terminal_text(super().format_help())

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            # Unknown options of a subcommand surface here: suggest among the chosen command's options.
            parser: argparse.ArgumentParser = self
            for action in self._actions:
                if isinstance(action, argparse._SubParsersAction):
                    parser = action.choices.get(getattr(parsed, action.dest, None) or "", self)
            first = extras[0]
            options = [s for action in parser._actions for s in action.option_strings]
            hint = did_you_mean(first.split("=", 1)[0], options) if first.startswith("-") else ""
            raise UsageError(f"unrecognized argument{'s' if len(extras) > 1 else ''} {' '.join(extras)}{hint} "
                             f"(see {parser.prog} --help)")
        return parsed

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse's own check (a private hook, stable since Python 3.2) without the close match.
        if action.choices is not None and value not in action.choices:
            allowed = ", ".join(map(str, action.choices))
            raise argparse.ArgumentError(
                action, f"invalid choice {value!r}{did_you_mean(value, map(str, action.choices))} (allowed: {allowed})")
