"""The tool-agent pattern: a role writes a Python program, the sandbox runs it, and the
env reads what it printed. Shared by every env that has a ``tool`` role."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from pettingllm_envs.core.actions import ActionResult
from pettingllm_envs.core.env_config import TextEnvConfig
from pettingllm_envs.core.parsing import find_code_block
from pettingllm_envs.core.text_env import TextAECEnv
from pettingllm_envs.sandbox import execute

#: How much of a program's output later observations show.
SHOWN_OUTPUT_CHARS = 1500
#: How much of a program later observations show (a tool agent's to the other roles, the
#: coder's to the tester in code_v0): the one budget for shown code.
SHOWN_CODE_CHARS = 4000


@dataclass
class ToolEnvConfig(TextEnvConfig):
    """Options of environments with a tool role (its program runs in the sandbox)."""

    tool_error_penalty: float = 0.5
    """Subtracted from the tool's local reward when its program fails or times out."""
    tool_timeout: float = 5.0
    """Seconds the tool's program may run."""

    def validate(self) -> None:
        super().validate()
        if self.tool_error_penalty < 0:
            raise ValueError(f"tool_error_penalty must be >= 0, got {self.tool_error_penalty}")
        if self.tool_timeout <= 0:
            raise ValueError(f"tool_timeout must be positive, got {self.tool_timeout}")


@dataclass(frozen=True)
class ToolRun:
    """The outcome of a tool action."""

    code: str | None
    """The program found in the action, or None."""
    stdout: str
    stderr: str
    failure: Literal["format", "execution"] | None
    """``"format"``: no code block; ``"execution"``: the program failed or timed out."""
    reason: str | None
    """A sentence explaining the failure, for infos and observations."""

    @property
    def feedback(self) -> str:
        """What the other roles are shown: the tail of stdout, plus stderr on failure."""
        text = self.stdout[-SHOWN_OUTPUT_CHARS:]
        if self.failure == "execution":
            text += "\n" + self.stderr[-SHOWN_OUTPUT_CHARS:]
        return text.strip()

    def failed_result(self, config: ToolEnvConfig) -> ActionResult:
        """The penalised result of a failed run: ``format_penalty`` without a code block,
        ``tool_error_penalty`` when the program crashed or timed out."""
        penalty = config.format_penalty if self.failure == "format" else config.tool_error_penalty
        return ActionResult(-penalty, valid=False, parsed={"code": self.code} if self.code else None,
                            invalid_reason=self.reason, feedback=self.feedback)


def run_tool_program(text: str, *, timeout: float, stdin: str = "", memory_mb: int = 512) -> ToolRun:
    """Extract the last code block of ``text`` and run it in the sandbox."""
    code, reason = find_code_block(text)
    if code is None:
        return ToolRun(None, "", "", "format", reason)
    result = execute(code, stdin=stdin, timeout=timeout, memory_mb=memory_mb)
    if result.passed:
        return ToolRun(code, result.stdout, result.stderr, None, None)
    if result.timed_out:
        reason = f"the program timed out after {timeout:g} s"
    else:
        reason = f"the program failed ({result.stop_reason or f'exit code {result.returncode}'})"
    return ToolRun(code, result.stdout, result.stderr, "execution", reason)


Read = TypeVar("Read")


def program_answers(
    texts: Sequence[str], config: ToolEnvConfig, read: Callable[[str], Read | None]
) -> list[Read | None]:
    """What the program of each candidate tool action prints, read with ``read``: None where the
    text has no code block, the program fails or ``read`` finds nothing (the actions the env
    would reject). Steps no env: for comparing candidate actions, as self-consistency's vote does."""
    answers: list[Read | None] = []
    for text in texts:
        run = run_tool_program(text, timeout=config.tool_timeout)
        answers.append(read(run.stdout) if run.failure is None else None)
    return answers


def read_tool_output(text: str, config: ToolEnvConfig,
                     read: Callable[[str], tuple[Read | None, str | None]], *,
                     reason_format: str = "program output: {}") -> tuple[Read, ToolRun] | ActionResult:
    """Run the tool's program and read what it printed with ``read`` (``(value, None)`` or
    ``(None, reason)``): ``(value, run)``, or the penalised result when there is no code
    block or the program fails (:meth:`ToolRun.failed_result`), or ``format_penalty`` when
    ``read`` finds nothing in its output (the reason put into ``reason_format``)."""
    run = run_tool_program(text, timeout=config.tool_timeout)
    if run.failure is not None:
        return run.failed_result(config)
    value, reason = read(run.stdout)
    if value is None:
        return ActionResult(-config.format_penalty, valid=False, parsed={"code": run.code},
                            invalid_reason=reason_format.format(reason), feedback=run.feedback)
    return value, run


def team_history_lines(
    env: TextAECEnv, agent: str, describe: Callable[[ActionResult], str], *, tool_role: str = "tool",
    result_label: str = "Result",
) -> list[str]:
    """The shared part of a tool-team observation: one line per action of earlier turns and,
    for roles acting after the tool in this turn, the tool's program, result and output
    (same-turn visibility, docs/design.md §3)."""
    lines = []
    past = [record for record in env.history if record.turn < env.turn]
    if past:
        lines.append("\nEarlier turns:")
        lines.extend(f"- turn {record.turn + 1}, {record.agent}: {describe(record.result)}" for record in past)
    tool = env.last_record(tool_role, env.turn) if agent != tool_role else None
    if tool is not None:
        code = tool.result.parsed.get("code") if isinstance(tool.result.parsed, dict) else None
        lines.append("\nThis turn the tool agent wrote:")
        lines.append(f"```python\n{code[:SHOWN_CODE_CHARS]}\n```" if code else "(no code)")
        lines.append(f"{result_label}: {describe(tool.result)}")
        if tool.result.feedback:
            lines.append(f"Program output:\n{tool.result.feedback}")
    return lines
