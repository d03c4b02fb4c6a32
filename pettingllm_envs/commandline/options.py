"""Command-line options from a config dataclass: one ``--field-name`` per field, its docstring as
help (its default shown); how a boolean is written on a command line or in a config file."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import itertools
import textwrap
import typing
from typing import Any, Literal


def field_docs(cls: type) -> dict[str, str]:
    """Each dataclass field's docstring (the string literal under it), whitespace-normalised."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))  # a class defined in a function is indented
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in itertools.pairwise(body):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)):
            docs[node.target.id] = " ".join(str(nxt.value.value).split())
    return docs


#: How a boolean may be written on the command line and in config files (any case).
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def bool_word(text: str) -> bool | None:
    """The boolean ``text`` spells (:data:`TRUE_WORDS`, :data:`FALSE_WORDS`; any case, outer
    spaces ignored), or None when it spells none."""
    lowered = text.strip().lower()
    if lowered in TRUE_WORDS:
        return True
    if lowered in FALSE_WORDS:
        return False
    return None


def dataclass_field_docs(cls: type) -> dict[str, str]:
    """The docstring of every field of dataclass ``cls``, a subclass's overriding its bases'."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs.update(field_docs(klass))
    return docs


def add_field_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type, *,
                      dest_prefix: str = "", defaults: Any = None) -> None:
    """One ``--field-name VALUE`` option per field of dataclass ``cls``, its docstring and default
    as help, stored under ``dest_prefix + name``. ``defaults``: an instance of ``cls`` whose
    values the help shows as the defaults (a config that gives the class other defaults).

    Values stay text (``--flag`` alone is true) and an option not given is absent from the parsed
    namespace, so the config's own checks coerce and validate what was given: the command line,
    YAML files and saved configs then share one set of rules and one kind of error. ``Literal``
    fields show their choices."""
    docs = dataclass_field_docs(cls)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if defaults is not None:
            default = getattr(defaults, f.name)
        else:
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if not docs.get(f.name):
            raise ValueError(f"{cls.__name__}.{f.name} has no docstring: every option needs help text")
        kwargs: dict[str, Any] = {"dest": dest_prefix + f.name, "default": argparse.SUPPRESS,
                                  "metavar": f.name.upper(),
                                  "help": f"{docs[f.name]} (default: {default!r})".replace("%", "%%")}
        tp = hints[f.name]
        if typing.get_origin(tp) is Literal:
            kwargs["metavar"] = "{" + ",".join(map(str, typing.get_args(tp))) + "}"
        elif tp is bool:
            kwargs.update(nargs="?", const=True, metavar="BOOL")
        parser.add_argument("--" + f.name.replace("_", "-"), **kwargs)
