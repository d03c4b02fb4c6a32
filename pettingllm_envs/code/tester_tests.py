"""The tester's action format in ``code_v0``: reading its tests from a reply, writing tests
the way the tester writes them (the oracle's action and the documented format), and showing
a test in an observation.

Function style: one ```` ```python ```` block of ``assert`` statements; each top-level
statement that contains an assert and names the function is one test, other statements are
setup for the tests after them. Stdio style: ``<input>...</input><output>...</output>``
pairs. The env module's docstring says which tests count.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

from pettingllm_envs.code.datasets import AssertTest, CodeProblem, IOTest, Test, assert_prefix, split_statements
from pettingllm_envs.code.judge.sandboxed.loading import clip
from pettingllm_envs.core.parsing import find_code_block

__all__ = ["IO_PAIR", "MAX_TEST_DEPTH", "format_tests", "parse_tests", "show_test", "tree_depth"]

IO_PAIR = re.compile(r"<input>(.*?)</input>\s*<output>(.*?)</output>", re.DOTALL | re.IGNORECASE)
#: Deepest syntax tree accepted in the tester's code: deeper ones are refused before any
#: recursive pass over them (``ast.unparse``, the compiler) could overflow the stack.
MAX_TEST_DEPTH = 100


def show_test(test: Test, limit: int) -> str:
    """A test as shown in observations (function style: its assert; stdio: the pair)."""
    if isinstance(test, AssertTest):
        return clip(test.check, limit)
    half = limit // 2 - 20
    return f"input {clip(test.input, half)!r} -> expected output {clip(test.output, half)!r}"


def format_tests(problem: CodeProblem, tests: Sequence[Test]) -> str:
    """Tests written the way the tester writes them (the oracle uses this, and it is the
    documented format)."""
    if problem.style == "stdio":
        return "\n".join(f"<input>\n{t.input}</input>\n<output>\n{t.output}</output>" for t in tests)
    lines, setup = [], assert_prefix(problem.entry_point)
    for test in tests:
        assert isinstance(test, AssertTest)
        new_setup = test.setup[len(setup):].strip("\n")
        if new_setup:
            lines.append(new_setup)
        lines.append(test.check)
        setup = test.setup
    return "```python\n" + "\n".join(lines) + "\n```"


def tree_depth(tree: ast.AST) -> int:
    """Depth of a syntax tree, without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def parse_tests(problem: CodeProblem, text: str) -> tuple[list[Test], int, str | None]:
    """The tester's tests (duplicates removed), how many of its assert statements earn
    nothing for their form (constant asserts, asserts that never name the function,
    duplicates of an earlier test), and why nothing could be parsed (None when tests were
    found). Never raises: code that is too deep or too large to parse is a reason."""
    if problem.style == "stdio":
        tests: list[Test] = []
        for given, expected in IO_PAIR.findall(text):
            given = given.removeprefix("\n")
            if given and not given.endswith("\n"):
                given += "\n"
            tests.append(IOTest(given, expected.removeprefix("\n")))
        if not tests:
            return [], 0, "no test of the form <input>...</input> <output>...</output> was found"
        unique = list(dict.fromkeys(tests))
        return unique, len(tests) - len(unique), None
    code, missing = find_code_block(text)
    if code is None:
        return [], 0, f"{missing} (the tests are assert statements in one ```python block)"
    try:
        module = ast.parse(code)
        if tree_depth(module) > MAX_TEST_DEPTH:
            return [], 0, f"the test code is nested more than {MAX_TEST_DEPTH} levels deep"
        names = ("candidate", problem.entry_point)
        tests = list(split_statements(module.body, assert_prefix(problem.entry_point), names))
    except (SyntaxError, ValueError) as error:
        return [], 0, f"the test code does not parse: {clip(str(error), 200)}"
    except (RecursionError, MemoryError):
        return [], 0, "the test code is too deeply nested or too large to parse"
    asserting = sum(1 for node in module.body if any(isinstance(n, ast.Assert) for n in ast.walk(node)))
    if not tests:
        return [], asserting, f"no assert statement that calls `{problem.entry_point}` was found"
    unique = list(dict.fromkeys(tests))
    return unique, asserting - len(unique), None
