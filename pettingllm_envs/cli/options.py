"""Command-line options generated from a config dataclass: one ``--field-name`` per field,
its docstring as help (its default shown), a parser per field type."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import itertools
import json
import typing
from typing import Any, Literal


def field_docs(cls: type) -> dict[str, str]:
    """Each dataclass field's docstring (the string literal under it), whitespace-normalised."""
    tree = ast.parse(inspect.getsource(cls))
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


def parse_bool(text: str) -> bool:
    value = bool_word(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return value


def parse_json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"key\": 1}}', got {text!r} "
                                         f"({error.msg})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"key\": 1}}', got {text!r}")
    return value


def add_dataclass_options(parser: argparse.ArgumentParser, cls: type) -> None:
    """One ``--field-name`` option per field of ``cls`` with its default and documentation;
    ``Literal`` fields get their choices, ``dict`` fields take a JSON object."""
    docs = field_docs(cls)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        kwargs: dict[str, Any] = {"default": default, "dest": f.name, "help": docs.get(f.name, "").replace("%", "%%")}
        if tp is bool:
            kwargs.update(type=parse_bool, nargs="?", const=True, metavar="BOOL")
        elif typing.get_origin(tp) is Literal:
            kwargs.update(choices=typing.get_args(tp))
        elif typing.get_origin(tp) is dict:
            kwargs.update(type=parse_json_object, metavar="JSON")
        elif tp in (int, float, str):
            kwargs.update(type=tp)
        else:
            raise TypeError(f"no command-line parser for field {f.name!r} of type {tp}")
        if not kwargs["help"]:
            raise ValueError(f"{cls.__name__}.{f.name} has no docstring: every option needs help text")
        parser.add_argument("--" + f.name.replace("_", "-"), **kwargs)
