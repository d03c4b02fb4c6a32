"""Sources compiled on the host, each once (cached): the code under test and the tests,
marshalled for a run's stdin (:func:`compiled_hex`; compiling runs none of the source), and the
trusted sources the host runs itself (:func:`compiled`).

Every program under test (the reference, its mutants, the coder's code) is compiled from its
syntax tree printed by ``ast.unparse`` (:func:`printed`), so that no two programs differ in
layout (blank lines, comments, line numbers, the docstring's place): a tester's test must tell
them apart by their results only."""

from __future__ import annotations

import ast
import functools
import marshal
import types

from pettingllm_envs.code.datasets import AssertTest
from pettingllm_envs.code.judge.sandboxed.loading import clip


@functools.lru_cache(maxsize=8192)
def compiled_hex(source: str, filename: str) -> tuple[str | None, str]:
    """``source`` compiled and marshalled (hex), or None and why it does not compile.
    Cached: a test is judged against many codes, a code against many tests. Compiling
    runs none of the source."""
    try:
        # optimize=0: a test's asserts must stay in even when the host runs with -O.
        code = compile(source, filename, "exec", dont_inherit=True, optimize=0)
        if filename == "solution.py":  # compiled as printed; the original gave any SyntaxError's line
            code = compile(printed(source), filename, "exec", dont_inherit=True, optimize=0)
        return marshal.dumps(code).hex(), ""
    except SyntaxError as error:
        where = f" (line {error.lineno} of the code)" if filename == "solution.py" and error.lineno else ""
        return None, clip(f"SyntaxError: {error.msg}{where}", 300)
    except (ValueError, RecursionError, MemoryError) as error:
        return None, clip(f"{type(error).__name__}: {error}", 300)


def printed(source: str) -> str:
    """``source`` as ``ast.unparse`` prints its syntax tree (the caller has compiled it, so it parses)."""
    return ast.unparse(ast.parse(source))


@functools.lru_cache(maxsize=8192)
def compiled(source: str, filename: str) -> types.CodeType:
    """Trusted source (a dataset's prompt or test) compiled for running on the host."""
    return compile(source, filename, "exec", dont_inherit=True, optimize=0)  # asserts kept under -O


def test_source(test: AssertTest) -> str:
    return f"{test.setup}\n{test.check}"
