"""Parsers shared by environments for the text that models write."""

from __future__ import annotations

import re

CODE_BLOCK = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code_block(text: str) -> str | None:
    """The last fenced code block (```python ... ``` or a bare ``` block), or None."""
    blocks = CODE_BLOCK.findall(text)
    if not blocks:
        return None
    code = blocks[-1]
    return code if code.strip() else None
