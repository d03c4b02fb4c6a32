"""Parsers shared by environments for the text that models write."""

from __future__ import annotations

import re

#: An opening fence: three backticks, an optional info string (the language), end of line.
FENCE_OPEN = re.compile(r"```[ \t]*([^\s`]*)[^\n`]*\n")
#: Info strings of a fence whose block is Python code (an empty one is a bare ``` block).
PYTHON_LANGUAGES = frozenset({"", "python", "py", "python3"})

NO_BLOCK = "no ```python code block was found"
UNCLOSED_BLOCK = "the ```python code block is not closed: end the code with a line ```"
EMPTY_BLOCK = "the ```python code block is empty"


def find_code_block(text: str) -> tuple[str | None, str | None]:
    """The last complete fenced Python block of ``text`` (```python ... ``` or a bare
    ``` block): ``(code, None)``, or ``(None, reason)`` saying whether there was no block,
    only an unclosed one, or an empty one.

    Blocks fenced with another language (```` ```json ````) are skipped whole, so their
    closing fence is never read as the opening of a Python block. One left-to-right scan
    with ``str.find``, linear in the length of ``text``.
    """
    code: str | None = None
    unclosed = False
    pos = 0
    while (start := text.find("```", pos)) != -1:
        opening = FENCE_OPEN.match(text, start)
        if opening is None:  # a stray fence, or four backticks: try one character further, as a regex would
            pos = start + 1
            continue
        end = text.find("```", opening.end())
        if end == -1:
            unclosed = opening.group(1).lower() in PYTHON_LANGUAGES
            break
        if opening.group(1).lower() in PYTHON_LANGUAGES:
            code = text[opening.end():end]
        pos = end + 3
    if code is not None:
        return (code, None) if code.strip() else (None, EMPTY_BLOCK)
    return None, UNCLOSED_BLOCK if unclosed else NO_BLOCK


def extract_code_block(text: str) -> str | None:
    """The last complete fenced Python block of ``text``, or None (see :func:`find_code_block`)."""
    return find_code_block(text)[0]
