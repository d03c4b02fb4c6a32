"""What code_v0 tells each role it is to do: the role instructions at the top of every
observation, for function-style and stdio problems."""

from __future__ import annotations

from pettingllm_envs.code.datasets import CodeProblem


def instructions(problem: CodeProblem, max_tests: int, agent: str) -> str:
    """The instructions of ``agent`` (``coder`` or ``tester``) for ``problem``; the tester is
    told it may write at most ``max_tests`` tests."""
    common = (
        "You are on a team of two agents, a coder and a tester, solving a programming problem. "
        "Each turn the coder submits code, then the tester submits tests. The episode ends when "
        "the code passes all of the tester's valid tests. The code is also scored on hidden tests."
    )
    if problem.style == "function":
        target = f"the Python function `{problem.entry_point}`"
        if agent == "coder":
            return common + (
                f"\nYou are the coder. Write {target} in full (with any imports and helpers it needs) in "
                "one ```python code block; only the last block counts."
            )
        return common + (
            f"\nYou are the tester. Write tests for {target} as `assert` statements in one ```python "
            f"block, e.g. `assert {problem.entry_point}(...) == ...`. Each top-level statement that "
            f"contains an assert is one test (at most {max_tests}); other statements (imports, "
            "helpers) run before the tests that follow them. A test is valid when a correct reference "
            "solution passes it and it checks what the function returns: it would fail if the results "
            "were different, and it fails on plausible wrong versions of the function (the more of them, "
            "the more credit); you earn credit for valid tests and extra credit for valid tests that "
            "catch a bug in the coder's code, which you keep if the coder's final code fixes it. "
            f"Asserts that never call `{problem.entry_point}` on inputs and check "
            "the result, and repeated tests, earn nothing."
        )
    if agent == "coder":
        return common + (
            "\nYou are the coder. Write a complete Python program that reads standard input and prints "
            "the answer, in one ```python code block; only the last block counts."
        )
    return common + (
        "\nYou are the tester. Write tests as input/output pairs, one pair per test "
        f"(at most {max_tests}):\n<input>\n...standard input...\n</input>\n<output>\n"
        "...expected standard output...\n</output>\nOutputs are compared token by token. A test is "
        "valid when a correct reference solution passes it; you earn credit for valid tests and "
        "extra credit for valid tests that catch a bug in the coder's code, which you keep if the "
        "coder's final code fixes it."
    )
