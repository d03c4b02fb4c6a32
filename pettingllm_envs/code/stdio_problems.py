"""Stdin/stdout problems written for this project, so that the stdio format of ``code_v0``
works offline. Each record is in the ``generic`` format of :mod:`pettingllm_envs.code.datasets`:
the statement shows one example; the hidden ``tests`` are different inputs whose expected
outputs come from the reference ``solution`` (``tests/test_code_env.py`` re-checks them)."""

PROBLEMS: tuple[dict, ...] = (
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
        "id": 'reverse_words',
        "statement": (
            'Read one line of words separated by single spaces. Print the words in reverse order, '
            'separated by single spaces.\n'
            '\n'
            'Example input:\n'
            'hello big world\n'
            'Example output:\n'
            'world big hello\n'
        ),
        "solution": 'print(" ".join(reversed(input().split())))\n',
        "tests": [
            {"input": 'one\n', "output": 'one\n'},
            {"input": 'a b c d e\n', "output": 'e d c b a\n'},
            {"input": 'the quick brown fox\n', "output": 'fox brown quick the\n'},
            {"input": 'x yy zzz yy x\n', "output": 'x yy zzz yy x\n'},
        ],
    },
    {
        "id": 'fizzbuzz',
        "statement": (
            'Read an integer n. For i = 1..n print one line: "FizzBuzz" if i is divisible by 15, '
            '"Fizz" if by 3, "Buzz" if by 5, else i.\n'
            '\n'
            'Example input:\n'
            '5\n'
            'Example output:\n'
            '1\n'
            '2\n'
            'Fizz\n'
            '4\n'
            'Buzz\n'
        ),
        "solution": (
            'n = int(input())\n'
            'for i in range(1, n + 1):\n'
            '    print("FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 '
            'else i)\n'
        ),
        "tests": [
            {"input": '1\n', "output": '1\n'},
            {"input": '3\n', "output": '1\n2\nFizz\n'},
            {"input": '15\n', "output": '1\n2\nFizz\n4\nBuzz\nFizz\n7\n8\nFizz\nBuzz\n11\nFizz\n13\n14\nFizzBuzz\n'},
            {
                "input": '16\n',
                "output": (
                    '1\n'
                    '2\n'
                    'Fizz\n'
                    '4\n'
                    'Buzz\n'
                    'Fizz\n'
                    '7\n'
                    '8\n'
                    'Fizz\n'
                    'Buzz\n'
                    '11\n'
                    'Fizz\n'
                    '13\n'
                    '14\n'
                    'FizzBuzz\n'
                    '16\n'
                ),
            },
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
        "id": 'balanced_brackets',
        "statement": (
            'Read one line made of the characters ()[]{}. Print YES if the brackets are balanced and '
            'properly nested, otherwise NO.\n'
            '\n'
            'Example input:\n'
            '([]{})\n'
            'Example output:\n'
            'YES\n'
        ),
        "solution": (
            'line = input().strip()\n'
            'pairs = {")": "(", "]": "[", "}": "{"}\n'
            'stack = []\n'
            'ok = True\n'
            'for ch in line:\n'
            '    if ch in "([{":\n'
            '        stack.append(ch)\n'
            '    elif not stack or stack.pop() != pairs[ch]:\n'
            '        ok = False\n'
            '        break\n'
            'print("YES" if ok and not stack else "NO")\n'
        ),
        "tests": [
            {"input": '(\n', "output": 'NO\n'},
            {"input": ')(\n', "output": 'NO\n'},
            {"input": '([)]\n', "output": 'NO\n'},
            {"input": '{[()()]}\n', "output": 'YES\n'},
            {"input": '((((()))))[]\n', "output": 'YES\n'},
            {"input": ']\n', "output": 'NO\n'},
        ],
    },
    {
        "id": 'transpose',
        "statement": (
            'Read two integers r and c, then r lines of c integers (a matrix). Print its transpose: '
            'c lines of r integers separated by spaces.\n'
            '\n'
            'Example input:\n'
            '2 3\n'
            '1 2 3\n'
            '4 5 6\n'
            'Example output:\n'
            '1 4\n'
            '2 5\n'
            '3 6\n'
        ),
        "solution": (
            'r, c = map(int, input().split())\n'
            'rows = [input().split() for _ in range(r)]\n'
            'for j in range(c):\n'
            '    print(" ".join(rows[i][j] for i in range(r)))\n'
        ),
        "tests": [
            {"input": '1 1\n9\n', "output": '9\n'},
            {"input": '3 1\n1\n2\n3\n', "output": '1 2 3\n'},
            {"input": '1 4\n5 6 7 8\n', "output": '5\n6\n7\n8\n'},
            {"input": '3 3\n1 2 3\n4 5 6\n7 8 9\n', "output": '1 4 7\n2 5 8\n3 6 9\n'},
        ],
    },
    {
        "id": 'run_length',
        "statement": (
            'Read one line of lowercase letters. Print its run-length encoding: each maximal run of '
            'a letter as the letter followed by the run length, e.g. "aaabcc" -> "a3b1c2".\n'
            '\n'
            'Example input:\n'
            'aaabcc\n'
            'Example output:\n'
            'a3b1c2\n'
        ),
        "solution": (
            's = input().strip()\n'
            'out = []\n'
            'i = 0\n'
            'while i < len(s):\n'
            '    j = i\n'
            '    while j < len(s) and s[j] == s[i]:\n'
            '        j += 1\n'
            '    out.append(f"{s[i]}{j - i}")\n'
            '    i = j\n'
            'print("".join(out))\n'
        ),
        "tests": [
            {"input": 'a\n', "output": 'a1\n'},
            {"input": 'abc\n', "output": 'a1b1c1\n'},
            {"input": 'zzzzzzzzzzzz\n', "output": 'z12\n'},
            {"input": 'aabbaa\n', "output": 'a2b2a2\n'},
            {"input": 'abbbbbbbbbbbbc\n', "output": 'a1b12c1\n'},
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
        "id": 'palindrome',
        "statement": (
            'Read one line. Ignoring case and every character that is not a letter or a digit, is it '
            'a palindrome? Print YES or NO.\n'
            '\n'
            'Example input:\n'
            'Never odd or even\n'
            'Example output:\n'
            'YES\n'
        ),
        "solution": (
            's = [ch.lower() for ch in input() if ch.isalnum()]\n'
            'print("YES" if s == s[::-1] else "NO")\n'
        ),
        "tests": [
            {"input": 'a\n', "output": 'YES\n'},
            {"input": 'ab\n', "output": 'NO\n'},
            {"input": 'A man, a plan, a canal: Panama\n', "output": 'YES\n'},
            {"input": 'No lemon, no melon!\n', "output": 'YES\n'},
            {"input": '12321x\n', "output": 'NO\n'},
            {"input": 'Was it a car or a cat I saw?\n', "output": 'YES\n'},
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
    {
        "id": 'word_frequency',
        "statement": (
            'Read an integer n, then n lines with one lowercase word each. Print each distinct word '
            'with its count, one "word count" per line, sorted by decreasing count and then '
            'alphabetically.\n'
            '\n'
            'Example input:\n'
            '3\n'
            'b\n'
            'a\n'
            'b\n'
            'Example output:\n'
            'b 2\n'
            'a 1\n'
        ),
        "solution": (
            'from collections import Counter\n'
            'n = int(input())\n'
            'counts = Counter(input().strip() for _ in range(n))\n'
            'for word, count in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0])):\n'
            '    print(word, count)\n'
        ),
        "tests": [
            {"input": '1\nx\n', "output": 'x 1\n'},
            {"input": '4\nd\nc\nb\na\n', "output": 'a 1\nb 1\nc 1\nd 1\n'},
            {"input": '6\npear\napple\npear\nfig\napple\npear\n', "output": 'pear 3\napple 2\nfig 1\n'},
            {"input": '5\nzz\nzz\nzz\nzz\nzz\n', "output": 'zz 5\n'},
            {"input": '4\nbb\naa\naa\nbb\n', "output": 'aa 2\nbb 2\n'},
        ],
    },
    {
        "id": 'binary_digits',
        "statement": (
            'Read a non-negative integer n. Print its binary representation without leading zeros (0 '
            'prints as 0), then, on the next line, the number of 1 bits.\n'
            '\n'
            'Example input:\n'
            '5\n'
            'Example output:\n'
            '101\n'
            '2\n'
        ),
        "solution": (
            'n = int(input())\n'
            'print(bin(n)[2:])\n'
            'print(bin(n).count("1"))\n'
        ),
        "tests": [
            {"input": '0\n', "output": '0\n0\n'},
            {"input": '1\n', "output": '1\n1\n'},
            {"input": '255\n', "output": '11111111\n8\n'},
            {"input": '1024\n', "output": '10000000000\n1\n'},
            {"input": '123456789\n', "output": '111010110111100110100010101\n16\n'},
        ],
    },
)
