"""Stdin/stdout problems written for this project, so that the stdio format of ``code_v0``
works offline. Each record is in the ``generic`` format of :mod:`pettingllm_envs.code.datasets`:
the statement shows one example; the hidden ``tests`` are different inputs whose expected
outputs come from the reference ``solution`` (``tests/envs/code/test_code_datasets.py`` re-checks them).
The records live in :mod:`.stdio_number_problems` and :mod:`.stdio_text_problems`; this module
puts them in the dataset's order."""

from pettingllm_envs.code.stdio_number_problems import NUMBER_PROBLEMS
from pettingllm_envs.code.stdio_text_problems import TEXT_PROBLEMS

#: The problems' ids in the dataset's order, which decides the problem an index of a split picks.
ORDER = ("sum_of_list", "max_subarray", "reverse_words", "fizzbuzz", "gcd_lcm", "count_primes", "balanced_brackets",
         "transpose", "run_length", "second_largest", "palindrome", "pair_count", "min_coins", "lis_length",
         "grid_paths", "word_frequency", "binary_digits")
_BY_ID = {record["id"]: record for record in (*NUMBER_PROBLEMS, *TEXT_PROBLEMS)}
PROBLEMS: tuple[dict, ...] = tuple(_BY_ID[problem_id] for problem_id in ORDER)
