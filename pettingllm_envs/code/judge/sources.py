"""Sources compiled on the host, each once (cached): the code under test and the tests,
marshalled for a run's stdin (:func:`compiled_hex`; compiling runs none of the source), and the
trusted sources the host runs itself (:func:`compiled`)."""

from __future__ import annotations

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
        return marshal.dumps(compile(source, filename, "exec", dont_inherit=True, optimize=0)).hex(), ""
    except SyntaxError as error:
        where = f" (line {error.lineno} of the code)" if filename == "solution.py" and error.lineno else ""
        return None, clip(f"SyntaxError: {error.msg}{where}", 300)
    except (ValueError, RecursionError, MemoryError) as error:
        return None, clip(f"{type(error).__name__}: {error}", 300)


@functools.lru_cache(maxsize=8192)
def compiled(source: str, filename: str) -> types.CodeType:
    """Trusted source (a dataset's prompt or test) compiled for running on the host."""
    return compile(source, filename, "exec", dont_inherit=True, optimize=0)  # asserts kept under -O


def test_source(test: AssertTest) -> str:
    return f"{test.setup}\n{test.check}"
