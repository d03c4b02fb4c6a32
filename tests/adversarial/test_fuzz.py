"""Property-based fuzzing: no string a model can emit makes ``env.step`` or a parser raise.

Every registered env (``pettingllm_envs.list_envs()``) and every role is stepped with
arbitrary Unicode (lone surrogates and NUL included), long digit runs, deep nesting and
code-block edge cases (unclosed, nested and ``~~~`` fences, odd languages, CRLF), mixed
with every env's command markers. The pure parsers are fuzzed directly, with properties
on what they return. Examples are derandomised (the same in every CI run) and no example
database is written; ``PETTINGLLM_FUZZ_EXAMPLES`` scales the number of examples (the
defaults keep this file well under a minute of CI time).
"""

from __future__ import annotations

import copy
import math
import os
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pettingllm_envs
from pettingllm_envs.core.parsing import EMPTY_BLOCK, NO_BLOCK, UNCLOSED_BLOCK, extract_code_block, find_code_block
from pettingllm_envs.games.sudoku import parse_answer
from pettingllm_envs.games.tictactoe import parse_cell
from pettingllm_envs.math.math_env import program_answer
from pettingllm_envs.math.verify import extract_boxed, normalize_answer, parse_number, verify
from pettingllm_envs.planning.moves import MOVES, parse_moves
from pettingllm_envs.policies import scripted_policy
from pettingllm_envs.research.commands import COMMANDS, parse_command
from pettingllm_envs.research.knowledge_base import generate_kb, interpret, normalize

EXAMPLES = int(os.environ.get("PETTINGLLM_FUZZ_EXAMPLES", "40"))
#: Stepping an env costs a sandbox run for tool roles and hidden tests for code_v0: fewer examples.
STEP_EXAMPLES = {"code_v0": max(3, EXAMPLES // 8)}


def fuzz(examples: int = EXAMPLES) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


#: Pieces that exercise the parsers: fences, markers, digits of every script, control characters.
PIECES = [
    "```", "```python\n", "```py\r\n", "```python3 \n", "```Python\n", "```js\n", "```python {.x}\n", "````\n",
    "~~~\n", "~~~python\n", "\n```\n", "```\n```", "MOVES:", "moves: ", "**Moves:** ", "MOVE:", "PLACE:", "GRID:\n",
    "ANSWER:", "DELEGATE:", "SEARCH:", "LOOKUP:", "REPORT:", "\\boxed{", "\\fbox{", "}", "{", "\\frac{", "^", "!",
    "\\text{ or }", "=", "\r\n", "\r", "\x00", "\ud800", "\udfff", "\ufeff", "\u202e", "٣", "³", "Ⅻ", "𝟗", "٫",
    "U", "D", "L", "R", "up", "1 2 3", "r1 c1 = 1", ";", "|", ".", "print(", ")", "print('MOVES: U R')",
    "def f(x):\n    return x\n", "assert candidate(1) == 1\n", "import os\n", " ", "\t", "\n",
]
unicode_text = st.text(alphabet=st.characters(exclude_categories=()), max_size=200)  # surrogates included
long_number = st.integers(min_value=1, max_value=20_000).map(lambda n: "7" * n)
nesting = st.tuples(st.sampled_from(["{", "(", "[", "\\boxed{", "\\frac{", "```python\n", "\\sqrt{", "^{"]),
                    st.integers(min_value=1, max_value=3_000)).map(lambda pair: pair[0] * pair[1])
model_text = st.lists(st.one_of(st.sampled_from(PIECES), unicode_text, long_number, nesting), max_size=10).map("".join)


# ------------------------------------------------------------------- every env, every role
def _states_before_each_role(env_id: str) -> dict[str, Any]:
    """For each role, an env at that role's first turn (reached with the oracle)."""
    oracle = scripted_policy(env_id)
    env = pettingllm_envs.make(env_id).unwrapped
    env.reset(seed=0)
    states: dict[str, Any] = {}
    for _ in range(50):
        agent = env.agent_selection
        if agent not in states:
            states[agent] = copy.deepcopy(env)
        if len(states) == len(env.possible_agents) or env.terminations[agent] or env.truncations[agent]:
            break
        env.step(oracle(env.observe(agent), agent, env.infos[agent]))
    return states


@pytest.mark.parametrize("env_id", pettingllm_envs.list_envs())
def test_no_string_makes_env_step_raise(env_id):
    states = _states_before_each_role(env_id)
    assert set(states) == set(pettingllm_envs.make(env_id).possible_agents)

    @fuzz(STEP_EXAMPLES.get(env_id, EXAMPLES))
    @given(text=model_text, role=st.sampled_from(sorted(states)))
    def step_once(text: str, role: str) -> None:
        env = copy.deepcopy(states[role])
        env.step(text)
        record = env.history[-1]
        assert record.agent == role and math.isfinite(record.reward)
        assert isinstance(env.observe(env.agent_selection), str)
        assert env.infos[role]["last_action"]["reward"] == record.reward

    step_once()


# ------------------------------------------------------------------------ pure parsers
@fuzz()
@given(text=model_text)
def test_find_code_block(text):
    code, reason = find_code_block(text)
    assert (code is None) != (reason is None)
    if code is not None:
        assert code in text and code.strip() and "```" not in code
        assert extract_code_block(text) == code
    else:
        assert reason in (NO_BLOCK, UNCLOSED_BLOCK, EMPTY_BLOCK)


@fuzz()
@given(text=model_text, require_prefix=st.booleans())
def test_parse_moves(text, require_prefix):
    moves, reason = parse_moves(text, require_prefix=require_prefix)
    assert (moves is None) != (reason is None)
    if moves is not None:
        assert moves and set(moves) <= set(MOVES)


@fuzz()
@given(text=model_text, size=st.sampled_from([4, 9]), require_marker=st.booleans())
def test_sudoku_parse_answer(text, size, require_marker):
    placements, reason = parse_answer(text, size, require_marker=require_marker)
    assert (placements is None) != (reason is None)
    if placements is not None:
        assert placements and len(placements) <= 3 * size * size
        assert all(len(p) == 3 and all(isinstance(n, int) and n >= 0 for n in p) for p in placements)


@fuzz()
@given(text=model_text)
def test_tictactoe_parse_cell(text):
    cell, reason = parse_cell(text)
    assert (cell is None) != (reason is None)
    assert cell is None or 0 <= cell <= 8


@fuzz()
@given(text=model_text)
def test_math_answer_extraction(text):
    boxed = extract_boxed(text)
    assert boxed is None or boxed in text
    assert isinstance(normalize_answer(text), str)
    parsed = parse_number(normalize_answer(text))
    assert parsed is None or len(parsed) == 2
    answer = program_answer(text)
    assert answer is None or len(answer) <= 500


@fuzz(max(5, EXAMPLES // 4))
@given(answer=model_text, gold=st.sampled_from(["42", "\\frac{1}{2}", "x+1", "\\{1,2\\}", "(1,2]"]))
def test_math_verify(answer, gold):
    assert verify(answer, gold) in (True, False)
    assert verify(gold, answer) in (True, False)


KB = generate_kb(__import__("random").Random(0), people=10, cities=6, countries=3, companies=5, universities=3)


@fuzz()
@given(text=model_text, agent=st.sampled_from(sorted(COMMANDS)))
def test_research_command_parser_and_interpreter(text, agent):
    command, argument, reason = parse_command(agent, text)
    assert reason is not None or (command in COMMANDS[agent] and 0 < len(argument) <= 300)
    check = interpret(KB, text)
    assert check.answer is None or KB.find(check.answer) is not None
    assert isinstance(normalize(text), str)


# ------------------------------------------------------------- megabyte inputs, linear parsers
MEGABYTE_INPUTS = [
    "```python\n" * 100_000, "```" * 300_000, "\\boxed{" * 100_000, "{" * 1_000_000, "MOVES: " + "U" * 1_000_000,
    "moves:" * 150_000, "PLACE: " + "1 " * 500_000, "GRID:\n" + ("1 2 3 4\n" * 120_000), "MOVE: " * 150_000,
    "ANSWER: " + " *" * 500_000 + "x", "DELEGATE:" + "\n" * 1_000_000, "9" * 1_000_000, "\ud800" * 1_000_000,
]


@pytest.mark.slow
@pytest.mark.parametrize("text", MEGABYTE_INPUTS, ids=lambda text: f"{text[:12]!r}x{len(text)}")
def test_parsers_survive_a_megabyte(text):
    """A hang guard, not a speed target: every parser handles 1 MB of pathological text."""
    start = time.monotonic()
    find_code_block(text)
    parse_moves(text, require_prefix=True)
    parse_answer(text, 9, require_marker=False)
    parse_cell(text)
    extract_boxed(text)
    normalize_answer(text)
    program_answer(text)
    parse_command("main", text)
    parse_command("sub", text)
    interpret(KB, text)
    normalize(text)
    assert verify(text, "42") is False
    assert time.monotonic() - start < 30.0
