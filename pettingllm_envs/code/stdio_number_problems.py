"""The number and algorithm problems of the stdin/stdout set written for this project
(:mod:`pettingllm_envs.code.stdio_problems`): sums, divisors, primes, pairs, and dynamic
programming. Records in the ``generic`` format of :mod:`pettingllm_envs.code.datasets`."""

NUMBER_PROBLEMS: tuple[dict, ...] = (
    {
        "id": 'sum_of_list',
        "statement": (
            'Read an integer n, then n integers on the next line. Print their sum.\n'
            '\n'
            'Example input:\n'
            '3\n'
            '1 2 3\n'
            'Example output:\n'
            '6\n'
        ),
        "solution": (
            'n = int(input())\n'
            'values = list(map(int, input().split())) if n else []\n'
            'print(sum(values))\n'
        ),
        "tests": [
            {"input": '1\n-5\n', "output": '-5\n'},
            {"input": '5\n10 20 30 40 50\n', "output": '150\n'},
            {"input": '4\n-1 -2 3 4\n', "output": '4\n'},
            {"input": '0\n\n', "output": '0\n'},
            {"input": '6\n1000000000 1000000000 1000000000 -7 0 2\n', "output": '2999999995\n'},
        ],
    },
    {
        "id": 'max_subarray',
        "statement": (
            'Read an integer n, then n integers. Print the largest sum of a non-empty contiguous '
            'subarray.\n'
            '\n'
            'Example input:\n'
            '5\n'
            '-2 1 -3 4 -1\n'
            'Example output:\n'
            '4\n'
        ),
        "solution": (
            'n = int(input())\n'
            'a = list(map(int, input().split()))\n'
            'best = cur = a[0]\n'
            'for x in a[1:]:\n'
            '    cur = max(x, cur + x)\n'
            '    best = max(best, cur)\n'
            'print(best)\n'
        ),
        "tests": [
            {"input": '1\n-7\n', "output": '-7\n'},
            {"input": '8\n-2 1 -3 4 -1 2 1 -5\n', "output": '6\n'},
            {"input": '4\n-3 -1 -2 -4\n', "output": '-1\n'},
            {"input": '5\n1 2 3 4 5\n', "output": '15\n'},
            {"input": '6\n5 -9 6 -2 3 -10\n', "output": '7\n'},
        ],
    },
    {
        "id": 'gcd_lcm',
        "statement": (
            'Read two positive integers a and b on one line. Print their greatest common divisor and '
            'least common multiple, separated by a space.\n'
            '\n'
            'Example input:\n'
            '4 6\n'
            'Example output:\n'
            '2 12\n'
        ),
        "solution": (
            'from math import gcd\n'
            'a, b = map(int, input().split())\n'
            'g = gcd(a, b)\n'
            'print(g, a // g * b)\n'
        ),
        "tests": [
            {"input": '7 13\n', "output": '1 91\n'},
            {"input": '12 18\n', "output": '6 36\n'},
            {"input": '1 1\n', "output": '1 1\n'},
            {"input": '100 75\n', "output": '25 300\n'},
            {"input": '123456 7890\n', "output": '6 162344640\n'},
        ],
    },
    {
        "id": 'count_primes',
        "statement": (
            'Read an integer n (0 <= n <= 100000). Print how many prime numbers are less than or '
            'equal to n.\n'
            '\n'
            'Example input:\n'
            '10\n'
            'Example output:\n'
            '4\n'
        ),
        "solution": (
            'n = int(input())\n'
            'if n < 2:\n'
            '    print(0)\n'
            'else:\n'
            '    sieve = bytearray([1]) * (n + 1)\n'
            '    sieve[0] = sieve[1] = 0\n'
            '    for i in range(2, int(n ** 0.5) + 1):\n'
            '        if sieve[i]:\n'
            '            sieve[i * i :: i] = bytearray(len(range(i * i, n + 1, i)))\n'
            '    print(sum(sieve))\n'
        ),
        "tests": [
            {"input": '0\n', "output": '0\n'},
            {"input": '2\n', "output": '1\n'},
            {"input": '30\n', "output": '10\n'},
            {"input": '100\n', "output": '25\n'},
            {"input": '100000\n', "output": '9592\n'},
        ],
    },
    {
        "id": 'second_largest',
        "statement": (
            'Read an integer n, then n integers. Print the second largest distinct value, or -1 if '
            'there are fewer than two distinct values.\n'
            '\n'
            'Example input:\n'
            '4\n'
            '3 1 4 1\n'
            'Example output:\n'
            '3\n'
        ),
        "solution": (
            'n = int(input())\n'
            'values = sorted(set(map(int, input().split())), reverse=True)\n'
            'print(values[1] if len(values) > 1 else -1)\n'
        ),
        "tests": [
            {"input": '1\n5\n', "output": '-1\n'},
            {"input": '3\n7 7 7\n', "output": '-1\n'},
            {"input": '5\n-1 -2 -3 -4 -5\n', "output": '-2\n'},
            {"input": '6\n10 9 10 9 8 10\n', "output": '9\n'},
            {"input": '2\n0 1\n', "output": '0\n'},
        ],
    },
    {
        "id": 'pair_count',
        "statement": (
            'Read integers n and k, then n integers. Print the number of index pairs i < j with a[i] '
            '+ a[j] == k.\n'
            '\n'
            'Example input:\n'
            '4 5\n'
            '1 4 2 3\n'
            'Example output:\n'
            '2\n'
        ),
        "solution": (
            'from collections import Counter\n'
            'n, k = map(int, input().split())\n'
            'seen = Counter()\n'
            'total = 0\n'
            'for x in map(int, input().split()):\n'
            '    total += seen[k - x]\n'
            '    seen[x] += 1\n'
            'print(total)\n'
        ),
        "tests": [
            {"input": '1 2\n1\n', "output": '0\n'},
            {"input": '5 4\n2 2 2 2 2\n', "output": '10\n'},
            {"input": '6 0\n-1 1 -2 2 0 0\n', "output": '3\n'},
            {"input": '3 100\n1 2 3\n', "output": '0\n'},
            {"input": '6 7\n3 4 3 4 1 6\n', "output": '5\n'},
        ],
    },
    {
        "id": 'min_coins',
        "statement": (
            'Read integers m and target, then m coin values. With unlimited coins of each value, '
            'print the fewest coins that sum exactly to target, or -1 if impossible.\n'
            '\n'
            'Example input:\n'
            '3 11\n'
            '1 2 5\n'
            'Example output:\n'
            '3\n'
        ),
        "solution": (
            'm, target = map(int, input().split())\n'
            'coins = list(map(int, input().split()))\n'
            'INF = float("inf")\n'
            'best = [0] + [INF] * target\n'
            'for t in range(1, target + 1):\n'
            '    for c in coins:\n'
            '        if c <= t and best[t - c] + 1 < best[t]:\n'
            '            best[t] = best[t - c] + 1\n'
            'print(best[target] if best[target] != INF else -1)\n'
        ),
        "tests": [
            {"input": '1 3\n2\n', "output": '-1\n'},
            {"input": '1 0\n7\n', "output": '0\n'},
            {"input": '3 6\n1 3 4\n', "output": '2\n'},
            {"input": '2 7\n2 4\n', "output": '-1\n'},
            {"input": '4 100\n1 5 10 25\n', "output": '4\n'},
        ],
    },
    {
        "id": 'lis_length',
        "statement": (
            'Read an integer n, then n integers. Print the length of the longest strictly increasing '
            'subsequence.\n'
            '\n'
            'Example input:\n'
            '6\n'
            '10 9 2 5 3 7\n'
            'Example output:\n'
            '3\n'
        ),
        "solution": (
            'from bisect import bisect_left\n'
            'n = int(input())\n'
            'tails = []\n'
            'for x in map(int, input().split()):\n'
            '    i = bisect_left(tails, x)\n'
            '    if i == len(tails):\n'
            '        tails.append(x)\n'
            '    else:\n'
            '        tails[i] = x\n'
            'print(len(tails))\n'
        ),
        "tests": [
            {"input": '1\n4\n', "output": '1\n'},
            {"input": '5\n5 4 3 2 1\n', "output": '1\n'},
            {"input": '5\n1 2 3 4 5\n', "output": '5\n'},
            {"input": '8\n0 8 4 12 2 10 6 14\n', "output": '4\n'},
            {"input": '6\n2 2 2 3 3 3\n', "output": '2\n'},
        ],
    },
    {
        "id": 'grid_paths',
        "statement": (
            "Read r and c, then r lines of c characters ('.' free, '#' blocked). Moving only right "
            'or down from the top-left to the bottom-right cell, through free cells, how many paths '
            'are there? Print the count modulo 1000000007.\n'
            '\n'
            'Example input:\n'
            '2 2\n'
            '..\n'
            '..\n'
            'Example output:\n'
            '2\n'
        ),
        "solution": (
            'r, c = map(int, input().split())\n'
            'grid = [input().strip() for _ in range(r)]\n'
            'MOD = 10**9 + 7\n'
            'ways = [[0] * c for _ in range(r)]\n'
            'for i in range(r):\n'
            '    for j in range(c):\n'
            '        if grid[i][j] == "#":\n'
            '            continue\n'
            '        if i == 0 and j == 0:\n'
            '            ways[i][j] = 1\n'
            '            continue\n'
            '        ways[i][j] = ((ways[i - 1][j] if i else 0) + (ways[i][j - 1] if j else 0)) % '
            'MOD\n'
            'print(ways[r - 1][c - 1])\n'
        ),
        "tests": [
            {"input": '1 1\n.\n', "output": '1\n'},
            {"input": '1 1\n#\n', "output": '0\n'},
            {"input": '3 3\n...\n.#.\n...\n', "output": '2\n'},
            {"input": '2 3\n.#.\n...\n', "output": '1\n'},
            {"input": '4 4\n....\n....\n....\n....\n', "output": '20\n'},
        ],
    },
)
