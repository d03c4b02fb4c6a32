"""pettingllm_envs.math.verify: the answer table, junk robustness, threads and the fallback."""

from __future__ import annotations

import random
import signal
import string
import sys
import threading
import time

import pytest

from pettingllm_envs.math import verify
from pettingllm_envs.math.symbolic import _verify_fallback
from pettingllm_envs.math.verify import (
    MATH_VERIFY_AVAILABLE,
    extract_boxed,
    normalize_answer,
    parse_number,
)

# (answer, gold, expected)
TABLE = [
    # plain numbers, signs, decimals, float noise from printed programs
    ("42", "42", True),
    ("42.0", "42", True),
    ("+42", "42", True),
    ("-42", "42", False),
    ("−7", "-7", True),  # Unicode minus
    ("0.30000000000000004", "0.3", True),
    ("7.000000000000001", "7", True),
    ("0.33", "\\frac{1}{3}", False),  # rounding is not equality
    ("0.3333333333333333", "1/3", True),
    ("41.99", "42", False),
    ("1e-3", "0.001", True),
    # fractions and LaTeX
    ("\\frac{1}{2}", "0.5", True),
    ("\\dfrac{3}{4}", "3/4", True),
    ("-\\frac{3}{4}", "\\frac{-3}{4}", True),
    ("\\frac{3}{4}", "\\frac{4}{3}", False),
    ("2\\sqrt{2}", "\\sqrt{8}", True),
    ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}", True),
    ("\\pi", "3.14", False),
    ("2\\pi", "\\pi \\cdot 2", True),
    ("x^2+2x+1", "(x+1)^2", True),
    ("x^2+1", "(x+1)^2", False),
    # percentages
    ("50\\%", "50", True),
    ("50%", "0.5", True),
    ("50", "0.5", False),
    ("25 percent", "25", True),
    # thousands separators, currency, units
    ("1,000", "1000", True),
    ("\\$1,234.50", "1234.5", True),
    ("12,345,678", "12345678", True),
    ("18 dollars", "18", True),
    ("\\$18", "18", True),
    ("5 \\text{ cm}", "5", True),
    ("60 km/h", "60", True),
    ("3 m", "3", True),
    ("90^\\circ", "90", True),
    ("2xy", "2", False),  # letters after a number are not always a unit
    ("3 apples", "4", False),
    # assignments and boxes
    ("x = 3", "3", True),
    ("x=3", "x = 3", True),
    ("y = -2", "2", False),
    ("The answer is \\boxed{17}.", "17", True),
    ("\\boxed{\\frac{1}{2}} and later \\boxed{3}", "3", True),
    ("\\boxed{\\frac{1}{2}} and later \\boxed{3}", "\\frac{1}{2}", False),
    ("$\\boxed{5}$", "5", True),
    # sets, tuples, intervals
    ("\\{1,2\\}", "\\{2,1\\}", True),
    ("\\{1,2,3\\}", "\\{1,2\\}", False),
    ("1, 2", "\\{2, 1\\}", True),
    ("(1,2]", "(1,2]", True),
    ("[1,2)", "(1,2]", False),
    ("(-\\infty, 3)", "(-\\infty,3)", True),
    # junk that must be False
    ("", "3", False),
    ("3", "", False),
    ("I don't know", "3", False),
    ("three", "3", False),
    ("\\boxed{}", "3", False),
]


@pytest.mark.parametrize(("answer", "gold", "expected"), TABLE)
def test_verify_table(answer, gold, expected):
    assert verify(answer, gold) is expected


def test_table_is_large_and_has_negatives():
    assert len(TABLE) >= 40
    assert sum(1 for *_, expected in TABLE if not expected) >= 15


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{\\frac{a}{b}}", "\\frac{a}{b}"),
        ("x \\boxed{1} y \\boxed{\\{1, \\{2\\}\\}}", "\\{1, \\{2\\}\\}"),
        ("\\boxed{1} then \\boxed{2", "1"),  # the last box is unclosed
        ("\\fbox{7}", "7"),
        ("no box", None),
        ("\\boxed{{{{}}}}", "{{{}}}"),
    ],
)
def test_extract_boxed_matches_nested_braces(text, expected):
    assert extract_boxed(text) == expected


def test_extract_boxed_is_linear_on_many_unclosed_boxes():
    text = "\\boxed{" * 20000
    start = time.perf_counter()
    assert extract_boxed(text) is None
    assert time.perf_counter() - start < 2.0


def test_normalize_and_parse_number():
    assert normalize_answer("\\$1,000.") == "1000"
    assert normalize_answer("\\{1,000\\}") == "\\{1,000\\}"  # a set, not a thousands separator
    assert parse_number("50%") == (50, True)
    assert parse_number("\\frac{-3}{4}") is not None and parse_number("\\frac{-3}{4}")[0] == -0.75
    assert parse_number("x") is None and parse_number("1/0") is None


def _junk(rng: random.Random) -> str:
    alphabet = string.printable + "\\{}^$%"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))


def test_random_junk_never_raises():
    rng = random.Random(0)
    golds = ["3", "\\frac{1}{2}", "\\{1,2\\}", "(0,1]", "x^2"]
    for _ in range(300):
        result = verify(_junk(rng), rng.choice(golds))
        assert isinstance(result, bool)
        assert isinstance(verify(rng.choice(golds), _junk(rng)), bool)


@pytest.mark.parametrize(
    "junk",
    [
        "{" * 5000 + "}" * 5000,
        "\\boxed{" + "{" * 3000 + "1" + "}" * 3000 + "}",
        "\\frac{" * 500 + "1",
        "9^{9^{9^{9}}}",
        "(2^{1000})^{1000}",
        "9" * 100000,
        "1 a " * 100000 + "!",
        "\\sqrt{" * 2000,
        "x" * 1_000_000,
        "\x00\ud800\uffff",
        None,
        12,
    ],
)
def test_huge_and_nested_junk_is_false_and_fast(junk):
    start = time.perf_counter()
    assert verify(junk, "3") is False
    assert verify("3", junk) is False
    assert time.perf_counter() - start < 10.0


def test_verify_works_in_a_worker_thread():
    results = {}

    def work():
        results["numbers"] = verify("\\frac{1}{2}", "0.5")
        results["sets"] = verify("\\{2, 1\\}", "\\{1,2\\}")
        results["wrong"] = verify("\\{2, 3\\}", "\\{1,2\\}")

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    assert results == {"numbers": True, "sets": True, "wrong": False}


@pytest.mark.skipif(not MATH_VERIFY_AVAILABLE, reason="math-verify's alarm is only used when it is installed")
def test_callers_pending_alarm_survives():
    previous = signal.signal(signal.SIGALRM, lambda *_: None)
    try:
        signal.alarm(100)
        assert verify("x^2+2x+1", "(x+1)^2")
        remaining = signal.alarm(0)
        assert 90 <= remaining <= 100
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_verify_without_math_verify_uses_the_fallback(monkeypatch):
    # ``pettingllm_envs.math.verify`` the attribute is the function; the module is in sys.modules
    module = sys.modules["pettingllm_envs.math.verify"]
    monkeypatch.setattr(module, "MATH_VERIFY_AVAILABLE", False)
    assert verify("x^2+2x+1", "(x+1)^2") and verify("\\{2,1\\}", "\\{1,2\\}") and verify("50%", "0.5")
    assert not verify("x^2+1", "(x+1)^2") and not verify("[1,2)", "(1,2]")


@pytest.mark.parametrize(
    ("answer", "gold", "expected"),
    [
        ("\\frac{1}{2}", "1/2", True),
        ("2\\sqrt{2}", "\\sqrt{8}", True),
        ("\\sqrt[3]{8}", "2", True),
        ("x^2+2x+1", "(x+1)^2", True),
        ("2x", "x \\cdot 2", True),
        ("x+1", "x+2", False),
        ("\\{1,2\\}", "\\{2,1\\}", True),
        ("\\{1,2\\}", "\\{1,3\\}", False),
        ("1,2", "\\{2,1\\}", True),
        ("(1,2]", "(1,2]", True),
        ("[1,2)", "(1,2]", False),
        ("(1,2,3)", "(1,2,3)", True),
        ("(1,3,2)", "(1,2,3)", False),
        ("\\pi", "3.14159", False),
        ("2\\pi", "\\pi+\\pi", True),
        ("(-\\infty,3)", "(-\\infty,3)", True),
        ("2^{10}", "1024", True),
        ("(2^{1000})^{1000}", "1", False),  # refused, not computed
        ("\\alpha", "\\alpha", True),  # outside the grammar: identical text only
        ("\\alpha", "\\beta", False),
        ("1/0", "1", False),
    ],
)
def test_fallback_without_math_verify(answer, gold, expected):
    assert _verify_fallback(normalize_answer(answer), normalize_answer(gold)) is expected


# ------------------------------------------------------ time bound, any thread
#: Answers whose comparison ran for minutes (or for ever) in a worker thread before the
#: comparison moved to a killable child process: SymPy expands or evaluates them exactly.
UNBOUNDED_ANSWERS = [
    "\\boxed{(x+1)^{5000}}",
    "\\boxed{\\binom{10^9}{5*10^8}}",
    "\\boxed{(10^{10})!}",
    "\\boxed{\\sqrt{2}^{\\sqrt{2}^{99999}}}",
    "\\boxed{\\Gamma(99999999)}",
    "\\boxed{9^{9^{9^9}}}",
    "\\boxed{99999999!}",
    "\\boxed{10^{10^{10}}}",
]


@pytest.mark.slow
def test_huge_answers_are_bounded_in_worker_threads():
    """The evaluation suite verifies in threads, where math-verify's alarms do nothing: every
    answer must still come back (False) within the bounded comparison's wall-clock limit."""
    from pettingllm_envs.math.bounded import MAX_WORKERS, WALL_SECONDS

    results: dict[str, bool] = {}
    threads = [threading.Thread(target=lambda a=a: results.__setitem__(a, verify(a, "42")), daemon=True)
               for a in UNBOUNDED_ANSWERS]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    guard = 10.0 + WALL_SECONDS * -(-len(threads) // MAX_WORKERS)  # worker start-up + one limit per wave
    for thread in threads:
        thread.join(max(0.0, guard - (time.monotonic() - start)))
    assert not any(thread.is_alive() for thread in threads), f"verify hung for {guard:.0f} s in a thread"
    assert results == dict.fromkeys(UNBOUNDED_ANSWERS, False)
    assert verify("x^2+2x+1", "(x+1)^2")  # the pool still answers afterwards


def test_an_overrunning_comparison_is_killed_and_the_pool_recovers():
    from pettingllm_envs.math import bounded

    start = time.monotonic()
    # the restricted parser has no alarm at all: only killing the child stops it
    assert bounded.bounded_symbolic_equal("(x+1)^{999}", "x^{999}+1", False, seconds=1.0) is None
    assert time.monotonic() - start < 5.0
    assert bounded.bounded_symbolic_equal("x^2+2x+1", "(x+1)^2", False) is True


@pytest.mark.parametrize(
    "hedge",
    [
        "x=41 \\text{ or } x=42",  # math-verify read this as Eq(x, 41x) & Eq(41x, 42), equal to 42
        "x=41, x=42",
        "41 \\text{ or } 42",
        "41 or 42",
        "42 \\approx 43",  # math-verify read this as 42
        "42 \\text{ or more}",
        "41 \\lor 42",
        "42 \\pm 1",
        "\\{41, 42\\}",
        "41, 42, 43",
    ],
)
def test_hedged_or_enumerated_answers_are_never_right(hedge):
    assert verify(hedge, "42") is False
    assert verify(f"\\boxed{{{hedge}}}", "42") is False


def test_relations_compare_whatever_their_spelling():
    assert verify("x \\leq 3", "x \\le 3") and verify("y = 1+2x", "y=2x+1")
    assert verify("5\\text{ cm}", "5") and verify("42 \\text{ apples}", "42")


@pytest.mark.slow
def test_no_comparison_process_outlives_its_parent():
    """A parent that exits mid-comparison (without atexit handlers) leaves no comparison
    process behind: the busy child ends when its CPU-time limit runs out."""
    import subprocess

    script = (
        "import threading, time\n"
        "from pettingllm_envs.math import bounded\n"
        "from pettingllm_envs.math.verify import verify\n"
        "assert verify('x^2+2x+1', '(x+1)^2')\n"
        "threading.Thread(target=bounded.bounded_symbolic_equal, args=('(x+1)^{999}', 'x', False, 60.0),\n"
        "                 daemon=True).start()\n"
        "time.sleep(0.5)\n"
        "import glob\n"
        "kids = [open(p).read() for p in glob.glob('/proc/self/task/*/children')]\n"
        "print(' '.join(kids), flush=True)\n"
        "os_exit = __import__('os')._exit\n"
        "os_exit(0)\n"  # no atexit: the idle child must exit on end of input, the busy one by itself
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    children = [int(pid) for pid in done.stdout.split()]
    assert len(children) == 1, done.stderr  # the one worker, busy with the runaway comparison
    deadline = time.monotonic() + 10 + bounded_cpu_limit()
    while time.monotonic() < deadline and any(_alive(pid) for pid in children):
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in children)


def bounded_cpu_limit() -> float:
    from pettingllm_envs.math.bounded import CPU_SECONDS_PER_REQUEST

    return CPU_SECONDS_PER_REQUEST


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False
